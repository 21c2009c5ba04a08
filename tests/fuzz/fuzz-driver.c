/* SPDX-License-Identifier: MIT */
/* Replays a fuzz corpus through a target without libFuzzer: every file of the directories (or files)
 * given, then every prefix of each (truncated messages are the commonest malformed input). A unit test
 * in every build, under the sanitizers in build-aux/check. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
        FILE *f = fopen(path, "rbe");
        if (!f)
                return -1;
        static uint8_t buf[65536];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        for (size_t len = 0; len <= n; len++)
                LLVMFuzzerTestOneInput(buf, len);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned n = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "fuzz-driver: %s: not found\n", argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        n += run_file(argv[i]) >= 0;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        char path[4096];
                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        n += run_file(path) >= 0;
                }
                if (d)
                        closedir(d);
        }
        printf("%u inputs replayed\n", n);
        return n > 0 ? 0 : 1;
}
