/* Per-call cost of pread(8 KiB) from a cached file: run plainly and under the interposer.
 * usage: callbench FILE ITERATIONS  -> prints ns per call (best of 5 rounds). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return perror("open"), 2;
    long n = atol(argv[2]);
    static char buf[8192];
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t = now();
        for (long i = 0; i < n; i++)
            if (pread(fd, buf, sizeof buf, (i % 128) * 8192) != 8192) return 3;
        double per = (now() - t) / n;
        if (per < best) best = per;
    }
    printf("%.1f\n", best);
    return 0;
}
