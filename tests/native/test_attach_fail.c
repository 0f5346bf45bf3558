/* A process under the interposer whose state cannot be attached must stop at once, loudly: exit
 * status 125, one line on stderr, and the same line first on the launcher's pipe
 * (DBTIER_IOTAP_ERRFD), never run on unemulated. Runs this program itself as the tiny child.
 *
 *   test_attach_fail IOTAP_LIB
 *   test_attach_fail child       (the child: does a little I/O and exits 0) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build_state.h"
#include "check.h"
#include "state.h"

#define NOBODY 65534

static char self[4096], preload[8192], work[256];

/* The sanitized build's child needs the sanitizer's runtime first in LD_PRELOAD: find the one this
 * program runs with. */
static void set_preload(const char *iotap) {
    char line[4096], asan[4096] = "";
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, "/libasan.so")) {
            p[strcspn(p, "\n")] = '\0';
            snprintf(asan, sizeof asan, "%s", p);
            break;
        }
    }
    if (maps) fclose(maps);
    snprintf(preload, sizeof preload, "%s%s%s", asan, asan[0] ? ":" : "", iotap);
}

enum errfd_mode { ERRFD_PIPE, ERRFD_UNSET, ERRFD_REGULAR_FILE, ERRFD_CLOSED, ERRFD_JUNK };

struct outcome {
    pid_t pid;
    int status;           /* exit status, or -1 if not a normal exit */
    char pipe[2048];      /* everything on DBTIER_IOTAP_ERRFD */
    ssize_t first_read;   /* what the first read of the pipe returned */
    char err[8192];       /* everything on stderr */
    uint64_t file_bytes;  /* ERRFD_REGULAR_FILE: what landed in that file */
};

static size_t drain(int fd, char *buf, size_t cap, ssize_t *first) {
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (first && *first == -2) *first = n;
        if (n <= 0) break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len;
}

static void run(const char *state, enum errfd_mode mode, int as_nobody, struct outcome *o) {
    int pipe_fd[2], err_fd[2];
    if (pipe(pipe_fd) != 0 || pipe(err_fd) != 0) exit(2);
    char regular[300];
    snprintf(regular, sizeof regular, "%s/errfd-file", work);
    int file_fd = mode == ERRFD_REGULAR_FILE ? open(regular, O_RDWR | O_CREAT | O_TRUNC, 0600) : -1;
    o->pid = fork();
    if (o->pid == 0) {
        dup2(err_fd[1], 2);
        close(pipe_fd[0]);
        close(err_fd[0]);
        char num[32];
        setenv("LD_PRELOAD", preload, 1);
        setenv("DBTIER_IOTAP", state, 1);
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        unsetenv("DBTIER_IOTAP_ERRFD");
        if (mode == ERRFD_PIPE) snprintf(num, sizeof num, "%d", pipe_fd[1]);
        if (mode == ERRFD_REGULAR_FILE) snprintf(num, sizeof num, "%d", file_fd);
        if (mode == ERRFD_CLOSED) snprintf(num, sizeof num, "%d", 987);
        if (mode == ERRFD_JUNK) snprintf(num, sizeof num, "3x");
        if (mode != ERRFD_UNSET) setenv("DBTIER_IOTAP_ERRFD", num, 1);
        if (as_nobody && (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)) _exit(97);
        execl(self, self, "child", (char *)NULL);
        _exit(98);
    }
    close(pipe_fd[1]);
    close(err_fd[1]);
    o->first_read = -2;
    drain(pipe_fd[0], o->pipe, sizeof o->pipe, &o->first_read);
    drain(err_fd[0], o->err, sizeof o->err, NULL);
    close(pipe_fd[0]);
    close(err_fd[0]);
    int status = 0;
    while (waitpid(o->pid, &status, 0) < 0 && errno == EINTR) {
    }
    o->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o->file_bytes = 0;
    if (file_fd >= 0) {
        struct stat st;
        o->file_bytes = fstat(file_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        close(file_fd);
        unlink(regular);
    }
}

/* The line a refused child must print: "dbtier-iotap: WHY; this process (pid N, uid U) cannot be
 * emulated, so it stops here[HINT]\n". */
static void expect_stopped(const char *what, const struct outcome *o, const char *why, uid_t uid, int hint,
                           int on_pipe) {
    char line[2048];
    snprintf(line, sizeof line,
             "dbtier-iotap: %s; this process (pid %d, uid %u) cannot be emulated, so it stops here%s\n", why,
             (int)o->pid, (unsigned)uid, hint ? ": run dbtier as the user the program runs as" : "");
    printf("%-26s exit %d, stderr: %s", what, o->status, o->err);
    CHECK(o->status == 125, "%s: exit status %d, not 125", what, o->status);
    CHECK(strstr(o->err, line) != NULL, "%s: stderr\n  %s\nlacks\n  %s", what, o->err, line);
    if (on_pipe) {
        CHECK(strcmp(o->pipe, line) == 0, "%s: the pipe had\n  %s\nnot\n  %s", what, o->pipe, line);
        CHECK(o->first_read == (ssize_t)strlen(line), "%s: the line came in pieces (first read %zd of %zu)", what,
              o->first_read, strlen(line));
    } else {
        CHECK(o->pipe[0] == '\0', "%s: something on the unused pipe: %s", what, o->pipe);
    }
}

static int child(void) {
    /* a little I/O, as any program would do: reaching it at all is what a refused child must not */
    char path[64];
    snprintf(path, sizeof path, "/tmp/dbt-attach-fail-%d", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    int ok = fd >= 0 && write(fd, "x", 1) == 1;
    if (fd >= 0) close(fd);
    unlink(path);
    return ok ? 0 : 3;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "child") == 0) return child();
    if (argc != 2) return fprintf(stderr, "usage: test_attach_fail IOTAP_LIB\n"), 2;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return perror("readlink"), 2;
    self[n] = '\0';
    set_preload(argv[1]);
    strcpy(work, "/tmp/dbt-attach-fail-XXXXXX");
    if (!mkdtemp(work)) return perror("mkdtemp"), 2;
    chmod(work, 0755); /* the unprivileged child must reach the state to be refused by its mode */

    char dir[300], state[300], corrupt[300], missing[300], why[1024];
    snprintf(dir, sizeof dir, "%s/a", work);
    snprintf(state, sizeof state, "%s/state", work);
    snprintf(corrupt, sizeof corrupt, "%s/corrupt", work);
    snprintf(missing, sizeof missing, "%s/missing", work);
    const struct test_device dev = {"a", "ram", dir, {{0}}};
    char err[512];
    CHECK(build_state(state, &dev, 1, NULL, err, sizeof err) == 0, "create: %s", err);
    FILE *f = fopen(corrupt, "w");
    fwrite("dbtiotap", 1, 8, f); /* the 8 bytes that once made a process die of SIGSEGV */
    fclose(f);
    struct outcome o;
    uid_t uid = getuid();

    run(state, ERRFD_PIPE, 0, &o);
    printf("%-26s exit %d\n", "valid state", o.status);
    CHECK(o.status == 0, "a valid state: exit status %d (stderr: %s)", o.status, o.err);
    CHECK(o.pipe[0] == '\0' && o.first_read == 0, "a valid state: something on the pipe: %s", o.pipe);

    run(missing, ERRFD_PIPE, 0, &o);
    snprintf(why, sizeof why, "cannot open state %s: %s", missing, strerror(ENOENT));
    expect_stopped("missing state", &o, why, uid, 0, 1);

    /* another user than the state's owner: the state is private (0600) */
    if (geteuid() == 0) {
        run(state, ERRFD_PIPE, 1, &o);
        snprintf(why, sizeof why, "cannot open state %s: %s", state, strerror(EACCES));
        expect_stopped("another user", &o, why, NOBODY, 1, 1);
    } else {
        char unreadable[300];
        snprintf(unreadable, sizeof unreadable, "%s/unreadable", work);
        CHECK(build_state(unreadable, &dev, 1, NULL, err, sizeof err) == 0, "create: %s", err);
        chmod(unreadable, 0);
        if (access(unreadable, R_OK) != 0) {
            run(unreadable, ERRFD_PIPE, 0, &o);
            snprintf(why, sizeof why, "cannot open state %s: %s", unreadable, strerror(EACCES));
            expect_stopped("unreadable state", &o, why, uid, 1, 1);
        }
        unlink(unreadable);
    }

    run(corrupt, ERRFD_PIPE, 0, &o);
    snprintf(why, sizeof why, "state %s is too small to be a dbtier state (8 bytes)", corrupt);
    expect_stopped("8-byte state", &o, why, uid, 0, 1);

    run(work, ERRFD_PIPE, 0, &o);
    snprintf(why, sizeof why, "cannot open state %s: %s", work, strerror(EISDIR));
    expect_stopped("a directory as state", &o, why, uid, 0, 1);

    snprintf(why, sizeof why, "cannot open state %s: %s", missing, strerror(ENOENT));
    run(missing, ERRFD_UNSET, 0, &o);
    expect_stopped("no DBTIER_IOTAP_ERRFD", &o, why, uid, 0, 0);
    run(missing, ERRFD_CLOSED, 0, &o);
    expect_stopped("ERRFD not open", &o, why, uid, 0, 0);
    run(missing, ERRFD_JUNK, 0, &o);
    expect_stopped("ERRFD not a number", &o, why, uid, 0, 0);
    run(missing, ERRFD_REGULAR_FILE, 0, &o);
    expect_stopped("ERRFD a regular file", &o, why, uid, 0, 0);
    CHECK(o.file_bytes == 0, "the line was written into a regular file (%llu bytes)",
          (unsigned long long)o.file_bytes);

    unlink(state);
    unlink(corrupt);
    rmdir(work);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
