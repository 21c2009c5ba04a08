/* SPDX-License-Identifier: MIT */
/* kv-zipf: the workload of the headline benchmark (bench/kvcache-bench.c).
 *
 *   kv-zipf SOCKET SECONDS KEYS VALUE_BYTES SEED MISS_US [ZIPF_S [RATE [AT:ZIPF_S:KEYS:MISS_US[:RATE]]]]
 *     GETs from a kvcache at SOCKET for SECONDS, keys drawn from a Zipf distribution (s = ZIPF_S, 0.99) over
 *     KEYS keys with a seeded generator (the same sequence for the same seed); a miss costs MISS_US of
 *     computation (a busy loop: the recompute) and SETs the value. RATE[@WARM]: at most so many GETs a
 *     second (0: as fast as it can), after WARM seconds as fast as it can (a cache filled before the
 *     paced part is measured). AT:...: from AT seconds on, another workload (bench/multicache-bench.c's
 *     swap) over keys of its own: none of those asked before comes again, as when another service's
 *     traffic arrives, so nothing the cache held for the first is worth anything to the second. A
 *     kvcache is told each GET's miss cost ("GET key COST"), for its value. Prints one line:
 *       survived|lost seconds=S requests=N hits=H misses=M p50_us=P p99_us=Q
 *     ("lost" when the cache's connection broke: it died) and exits 0 or 1.
 *     SOCKET "redis:PATH": the same against a Redis at the Unix socket PATH, in RESP (GET; SET on a miss).
 *   kv-zipf --read FILE SECONDS
 *     Reads FILE over and over for SECONDS or until SIGTERM (the file working set beside the cache), in
 *     reads of 64 KiB; prints reads=N seconds=S. */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static double zipf_s = 0.99; /* the optional 7th argument */
#define LATENCY_BUCKETS 100000 /* 1 us each; slower requests land in the last */

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* splitmix64: small, seeded, the same everywhere. */
static uint64_t rng_state;
static uint64_t rng_next(void) {
        uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

static double *zipf_cdf(size_t n) {
        double *cdf = malloc(n * sizeof(double)), sum = 0;
        if (!cdf)
                return NULL;
        for (size_t i = 0; i < n; i++)
                cdf[i] = (sum += 1.0 / pow((double) (i + 1), zipf_s));
        for (size_t i = 0; i < n; i++)
                cdf[i] /= sum;
        return cdf;
}

static size_t zipf_draw(const double *cdf, size_t n) {
        double u = (double) (rng_next() >> 11) / (double) (1ULL << 53);
        size_t lo = 0, hi = n - 1;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (cdf[mid] < u)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int send_all(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

static char rbuf[1 << 20];
static size_t rlen;
static bool redis;

/* What follows a reply's first line, and whether it is a value (1), not (0), or nothing this client asks
 * for (-1). kvcache: "VALUE <len>\n<len bytes>", "MISS\n" or "STORED\n". RESP: a bulk string
 * ("$<len>\r\n<len bytes>\r\n") is a value; nil, a status or an error ("-OOM ...", a write refused) not. */
static int reply_body(const char *line, size_t *ret_body) {
        *ret_body = 0;
        if (!redis) {
                int value = strncmp(line, "VALUE ", 6) == 0;
                if (value)
                        *ret_body = strtoul(line + 6, NULL, 10);
                return value;
        }
        if (line[0] != '$' && line[0] != '+' && line[0] != '-')
                return -1;
        long len = line[0] == '$' ? strtol(line + 1, NULL, 10) : -1;
        if (len >= 0)
                *ret_body = (size_t) len + 2;
        return len >= 0;
}

/* One reply: 1 for a value, 0 otherwise, -1 when the connection broke. */
static int read_reply(int fd) {
        for (;;) {
                char *nl = memchr(rbuf, '\n', rlen);
                if (nl) {
                        size_t head = (size_t) (nl - rbuf) + 1, body;
                        int value = reply_body(rbuf, &body);
                        if (value < 0)
                                return -1;
                        if (rlen >= head + body) {
                                memmove(rbuf, rbuf + head + body, rlen - head - body);
                                rlen -= head + body;
                                return value;
                        }
                }
                if (rlen == sizeof(rbuf))
                        return -1;
                ssize_t n = read(fd, rbuf + rlen, sizeof(rbuf) - rlen);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                rlen += (size_t) n;
        }
}


/* Added to every key's number once the workload switched: its keys are not the first's. */
static size_t key_base;

/* GET: 1 a hit, 0 a miss, -1 the connection broke. */
static int do_get(int fd, size_t key, uint64_t miss_us) {
        char cmd[128], k[32];
        int kn = snprintf(k, sizeof(k), "k%zu", key_base + key);
        int n = redis ? snprintf(cmd, sizeof(cmd), "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kn, k)
                      : snprintf(cmd, sizeof(cmd), "GET %s %llu\n", k, (unsigned long long) miss_us);
        if (send_all(fd, cmd, (size_t) n) < 0)
                return -1;
        return read_reply(fd);
}

/* SET the value: 0, or -1 when the connection broke. */
static int do_set(int fd, size_t key, const char *value, size_t value_bytes) {
        char cmd[160], k[32];
        int kn = snprintf(k, sizeof(k), "k%zu", key_base + key);
        int n = redis ? snprintf(cmd, sizeof(cmd), "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%zu\r\n", kn, k, value_bytes)
                      : snprintf(cmd, sizeof(cmd), "SET %s %zu\n", k, value_bytes);
        if (send_all(fd, cmd, (size_t) n) < 0 || send_all(fd, value, value_bytes) < 0 ||
            (redis && send_all(fd, "\r\n", 2) < 0))
                return -1;
        return read_reply(fd) < 0 ? -1 : 0;
}

static uint64_t percentile(const uint64_t *hist, uint64_t total, double p) {
        uint64_t want = (uint64_t) ((double) total * p), seen = 0;
        for (size_t i = 0; i < LATENCY_BUCKETS; i++)
                if ((seen += hist[i]) > want)
                        return i;
        return LATENCY_BUCKETS;
}

static volatile sig_atomic_t stop;
static void on_term(int sig) {
        (void) sig;
        stop = 1;
}

static int reader(const char *file, double seconds) {
        static char chunk[65536];
        signal(SIGTERM, on_term);
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                perror("kv-zipf: working set");
                return 2;
        }
        uint64_t start = now_us(), end = start + (uint64_t) (seconds * 1e6), reads = 0;
        off_t off = 0;
        while (!stop && now_us() < end) {
                ssize_t n = pread(fd, chunk, sizeof(chunk), off);
                off = n > 0 ? off + n : 0;
                reads += n > 0;
        }
        printf("reads=%llu seconds=%.2f\n", (unsigned long long) reads, (double) (now_us() - start) / 1e6);
        return 0;
}

int main(int argc, char *argv[]) {
        if (argc == 4 && strcmp(argv[1], "--read") == 0)
                return reader(argv[2], atof(argv[3]));
        if (argc < 7 || argc > 10) {
                fprintf(stderr, "usage: kv-zipf SOCKET SECONDS KEYS VALUE_BYTES SEED MISS_US [ZIPF_S [RATE "
                                "[AT:ZIPF_S:KEYS:MISS_US[:RATE]]]] | --read FILE SECONDS\n");
                return 2;
        }
        if (argc >= 8)
                zipf_s = atof(argv[7]);
        double seconds = atof(argv[2]), rate = argc >= 9 ? atof(argv[8]) : 0, switch_at = -1, switch_s = 0,
               switch_rate = -1;
        const char *at = argc >= 9 ? strchr(argv[8], '@') : NULL;
        double warm = at ? atof(at + 1) : 0;
        size_t keys = strtoul(argv[3], NULL, 10), value_bytes = strtoul(argv[4], NULL, 10), switch_keys = 0;
        uint64_t miss_us = strtoull(argv[6], NULL, 10), switch_miss = 0;
        if (argc >= 10 && sscanf(argv[9], "%lf:%lf:%zu:%llu:%lf", &switch_at, &switch_s, &switch_keys,
                                 (unsigned long long *) &switch_miss, &switch_rate) < 4) {
                fprintf(stderr, "kv-zipf: expected AT:ZIPF_S:KEYS:MISS_US[:RATE], got %s\n", argv[9]);
                return 2;
        }
        rng_state = strtoull(argv[5], NULL, 10);
        double *cdf = zipf_cdf(keys);
        char *value = malloc(value_bytes + 64);
        uint64_t *hist = calloc(LATENCY_BUCKETS + 1, sizeof(uint64_t));
        if (!cdf || !value || !hist || keys == 0)
                return 2;
        memset(value, 'v', value_bytes);

        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        redis = strncmp(argv[1], "redis:", 6) == 0;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1] + (redis ? 6 : 0));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                perror("kv-zipf: connect");
                return 2;
        }

        uint64_t start = now_us(), end = start + (uint64_t) (seconds * 1e6), requests = 0, hits = 0, misses = 0;
        uint64_t paced_from = 0, paced_requests = 0;
        int lost = 0;
        while (!lost) {
                uint64_t t0 = now_us();
                if (t0 >= end)
                        break;
                if (switch_at >= 0 && t0 - start >= (uint64_t) (switch_at * 1e6)) {
                        /* The other workload from now on: its keys, its skew, its cost, its rate. */
                        key_base += keys;
                        zipf_s = switch_s;
                        free(cdf);
                        cdf = zipf_cdf(keys = switch_keys);
                        if (!cdf)
                                return 2;
                        miss_us = switch_miss;
                        if (switch_rate >= 0) {
                                rate = switch_rate;
                                if (paced_from) {
                                        paced_from = t0; /* paced anew from here, at the new rate */
                                        paced_requests = requests;
                                }
                        }
                        switch_at = -1;
                }
                /* Paced after the warm-up: the n-th request since then no sooner than n / rate after it. */
                if (rate > 0 && t0 - start >= (uint64_t) (warm * 1e6)) {
                        if (paced_from == 0) {
                                paced_from = t0;
                                paced_requests = requests;
                        }
                        uint64_t due = paced_from + (uint64_t) ((double) (requests - paced_requests) * 1e6 / rate);
                        if (due > t0) {
                                usleep((useconds_t) MIN(due - t0, (uint64_t) 100000));
                                continue;
                        }
                }
                size_t key = zipf_draw(cdf, keys);
                int r = do_get(fd, key, miss_us);
                if (r == 0) {
                        /* The recompute, then the value goes in. */
                        while (now_us() - t0 < miss_us)
                                ;
                        if (do_set(fd, key, value, value_bytes) < 0)
                                r = -1;
                        misses++;
                } else if (r == 1)
                        hits++;
                if (r < 0) {
                        lost = 1;
                        break;
                }
                requests++;
                uint64_t us = now_us() - t0;
                hist[us < LATENCY_BUCKETS ? us : LATENCY_BUCKETS]++;
        }
        printf("%s seconds=%.2f requests=%llu hits=%llu misses=%llu p50_us=%llu p99_us=%llu\n",
               lost ? "lost" : "survived", (double) (now_us() - start) / 1e6, (unsigned long long) requests,
               (unsigned long long) hits, (unsigned long long) misses,
               (unsigned long long) percentile(hist, requests, 0.50), (unsigned long long) percentile(hist, requests, 0.99));
        fflush(stdout);
        close(fd);
        free(cdf);
        free(value);
        free(hist);
        return lost;
}
