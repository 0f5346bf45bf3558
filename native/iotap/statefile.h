/* A state file as only the simulator library (Python's side) handles it: built from device specs,
 * dumped, its layout read, paused, its page cache emptied. The interposer never links this part
 * (statefile.c): it attaches a state and runs on it (state.h). */
#ifndef DBT_STATEFILE_H
#define DBT_STATEFILE_H

#include "state.h"

/* ---- What Python hands the library to build a state or a model: structs (described to Python by
 * dbt_layout_json), never text. The version moves whenever these structs change meaning. */
#define DBT_SPEC_VERSION 1

struct dbt_device_spec {
    char name[DBT_NAME_MAX]; /* NUL-terminated, zero after it */
    char dir[DBT_DIR_MAX];   /* absolute */
    int32_t kind;            /* enum dbt_kind */
    uint32_t nparams;        /* the kind's option count: params[i] is option i of its table */
    double params[DBT_MAX_PARAMS];
};

struct dbt_pc_config {
    uint64_t bytes; /* 0: no page cache, all I/O direct */
    uint32_t readahead_kb, dirty_background_pct, dirty_pct;
    uint32_t dsync_data; /* 1: buffered writes to database files are written through */
};

/* A spec's kind and parameters as a model takes them: each a number within its option's range.
 * Returns 0, or -1 with a message in err. */
int dbt_spec_params(const struct dbt_device_spec *spec, struct dbt_params *p, char *err, size_t errlen);
/* The same, and its name and directory, into a device slot. */
int dbt_spec_device(const struct dbt_device_spec *spec, struct dbt_device_slot *d, char *err, size_t errlen);
/* A spec of a kind's defaults, and one parameter of it set by name: for C callers (the tests);
 * Python fills the struct itself, in the option table's order. */
int dbt_spec_init(struct dbt_device_spec *spec, const char *name, const char *kind, const char *dir, char *err,
                  size_t errlen);
int dbt_spec_set(struct dbt_device_spec *spec, const char *param, double value, char *err, size_t errlen);

/* Builds a state file for n devices and a page cache (NULL: none). Every field is checked before
 * anything is written: a bad one is refused with a message naming the device. Returns 0, or -1 with
 * a message in err. */
int dbt_state_create(const char *state_path, uint32_t spec_version, const struct dbt_device_spec *devs, uint32_t n,
                     const struct dbt_pc_config *pc, char *err, size_t errlen);

/* The host's wake-up delay after a timed sleep, its 90th percentile (ns), measured in about 3 ms. */
uint64_t dbt_host_wake_p90_ns(void);

/* Pauses (1) or resumes (0) the emulation of every process attached to the state. */
int dbt_state_set_paused(const char *state_path, int paused, char *err, size_t errlen);
/* The durability log is kept from now (on) or no more, by the processes given its folder. */
int dbt_state_set_durlog(const char *state_path, int on, char *err, size_t errlen);
/* The process `pid` (0: none) is the measurement's own: --cpu-scale does not slow it */
int dbt_state_set_undilated(const char *state_path, uint32_t pid, char *err, size_t errlen);
/* Arms the injected fsync error (state.h): the nth flush of a file on device devno (of enum
 * dbt_pg_class pg_class; -1: any) fails; devno -1 disarms it. */
int dbt_state_set_fault(const char *state_path, int devno, unsigned nth, int pg_class, const char *suffix, char *err,
                        size_t errlen);

/* Empties the emulated page cache (if the state has one): a cold start. */
int dbt_state_clear_page_cache(const char *state_path, char *err, size_t errlen);

/* Sets every capped device's burst credits to `fraction` (0..1) of a full bucket, its refill counted
 * from `at_ns` (0: now, the live clock): what a run or a replay's measured interval starts with. */
int dbt_state_set_credits(const char *state_path, double fraction, uint64_t at_ns, char *err, size_t errlen);

/* The file layout a replay needs: each chunk as (file index, chunk number, device byte address) in
 * out (3 x cap), and each device's allocation cursor in cursors (DBT_MAX_DEVICES). Returns the
 * number of chunks (more than cap: call again with room), or -1 with err set. */
int64_t dbt_state_chunk_map(const char *state_path, uint64_t *out, uint64_t cap, uint64_t *cursors, char *err,
                            size_t errlen);

/* Whole-state dump as JSON, malloc'd (caller frees). NULL on error with err set. */
char *dbt_state_json(const char *state_path, char *err, size_t errlen);

#endif
