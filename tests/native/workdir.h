/* The C tests' folder (argv[1], or a fresh one under /tmp) and the states they attach in it. */
#ifndef DBT_TEST_WORKDIR_H
#define DBT_TEST_WORKDIR_H

#include <stdio.h>
#include <stdlib.h>

#include "build_state.h"
#include "state.h"

/* argv[1], or a fresh folder under /tmp, removed by work_done. */
static char work[512];
static int work_own;

static int work_begin(int argc, char **argv, const char *prefix) {
    work_own = argc < 2;
    if (work_own) {
        snprintf(work, sizeof work, "/tmp/%s-XXXXXX", prefix);
        return mkdtemp(work) ? 0 : -1;
    }
    snprintf(work, sizeof work, "%s", argv[1]);
    return 0;
}

static void work_done(void) {
    if (!work_own) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0) printf("could not remove %s\n", work);
}

/* A state of n devices (and a page cache, if pc is given) in the tests' folder, attached; the test
 * stops when it cannot be made. */
static struct dbt_state *make_states(const char *name, const struct test_device *devs, int n,
                                     const struct dbt_pc_config *pc) {
    char state[700], err[512];
    snprintf(state, sizeof state, "%s/%s.state", work, name);
    if (build_state(state, devs, n, pc, err, sizeof err) != 0) {
        printf("cannot create %s: %s\n", state, err);
        exit(1);
    }
    struct dbt_state *s = dbt_state_attach(state, err, sizeof err);
    if (!s) {
        printf("cannot attach %s: %s\n", state, err);
        exit(1);
    }
    return s;
}

/* A state of one device (and a page cache, if pc is given). */
static struct dbt_state *make_state(const char *name, struct test_device dev, const struct dbt_pc_config *pc) {
    return make_states(name, &dev, 1, pc);
}

#endif
