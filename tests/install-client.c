/* SPDX-License-Identifier: MIT */
/* A client built only from what `meson install` put down: the header and the pkg-config file. */
#include <pressure.h>
#include <stdio.h>

int main(int argc, char *argv[]) {
        struct pressure_client *c;
        struct pressure_status *st;
        if (argc != 2 || pressure_client_new(argv[1], &c) < 0 || pressure_client_get_status(c, &st) < 0)
                return 1;
        printf("system level %s\n", pressure_level_to_string(pressure_scope_get_level(pressure_status_get_system(st))));
        pressure_status_unref(st);
        pressure_client_unref(c);
        return 0;
}
