/* The C tests' way to build a state: devices by kind, parameters by name, as Python builds its
 * struct dbt_device_spec array (the library's own defaults for what is not given). */
#ifndef DBT_TEST_BUILD_STATE_H
#define DBT_TEST_BUILD_STATE_H

#include <stdio.h>

#include "statefile.h"

struct test_param {
    const char *name;
    double value;
};

struct test_device {
    const char *name, *kind, *dir;
    struct test_param params[8]; /* up to the first without a name */
};

/* Builds the state at path; 0, or -1 with a message in err. */
static int build_state(const char *path, const struct test_device *devs, int n, const struct dbt_pc_config *pc,
                       char *err, size_t errlen) {
    static struct dbt_device_spec specs[DBT_MAX_DEVICES + 1];
    if (n > DBT_MAX_DEVICES + 1) n = DBT_MAX_DEVICES + 1;
    for (int i = 0; i < n; i++) {
        if (dbt_spec_init(&specs[i], devs[i].name, devs[i].kind, devs[i].dir, err, errlen) != 0) return -1;
        for (const struct test_param *p = devs[i].params; p < devs[i].params + 8 && p->name; p++)
            if (dbt_spec_set(&specs[i], p->name, p->value, err, errlen) != 0) return -1;
    }
    return dbt_state_create(path, DBT_SPEC_VERSION, specs, (uint32_t)n, pc, err, errlen);
}

#endif
