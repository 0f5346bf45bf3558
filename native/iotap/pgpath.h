/* PostgreSQL's file names, once (what its src/common/relpath.c makes): which of a server's files a
 * path is, and the ids its name carries. Paths are as the interposer sees them, resolved: a
 * tablespace appears as its location, <location>/PG_<version>_<catalog>/<db>/<file>, not as
 * pg_tblspc/<oid>, and a WAL folder moved elsewhere by its segment names alone. Used by the dsync
 * rule (a dsync device writes database files through), recorded in the state's file table, and
 * called by Python (measure, predict) through the simulator library. */
#ifndef DBT_PGPATH_H
#define DBT_PGPATH_H

#include <stdint.h>

enum dbt_pg_class {
    DBT_PG_OTHER = 0,
    DBT_PG_RELATION, /* a relation's main or init fork, a segment of it */
    DBT_PG_FSM,
    DBT_PG_VM,
    DBT_PG_WAL,  /* in pg_wal, or named as a WAL segment */
    DBT_PG_TEMP, /* a sort's or hash's temp file (pgsql_tmp), or a temporary relation's (t<backend>_<node>) */
    DBT_PG_CLASSES
};

/* Where a relation file lies. */
enum dbt_pg_space { DBT_PG_SPACE_NONE = 0, DBT_PG_SPACE_GLOBAL, DBT_PG_SPACE_DEFAULT, DBT_PG_SPACE_LOCATION };
enum dbt_pg_fork { DBT_PG_FORK_MAIN = 0, DBT_PG_FORK_FSM, DBT_PG_FORK_VM, DBT_PG_FORK_INIT };

struct dbt_pg_path {
    uint8_t cls;   /* enum dbt_pg_class */
    uint8_t space; /* enum dbt_pg_space: a relation file's tablespace */
    uint8_t fork;  /* enum dbt_pg_fork */
    /* A database file, what a dsync device writes through: a name of a relation's fork or segment,
     * a WAL segment or an SLRU page file (hex: 16384, 16384_fsm, 16384.1, 000000010000000000000001,
     * 0000), not under pgsql_tmp. Not the relation cache's init file, nor anything else a server
     * writes: ASE's dsync is a property of database devices. */
    uint8_t dsync;
    uint32_t space_len; /* DBT_PG_SPACE_LOCATION: the location is the path's first space_len bytes */
    int64_t database, relfilenode, segment; /* -1: none */
};

void dbt_pg_path_classify(const char *path, struct dbt_pg_path *out);

/* Their names, in enum order: what Python and the state dump call them. */
extern const char *const dbt_pg_class_names[DBT_PG_CLASSES];
extern const char *const dbt_pg_space_names[4];
extern const char *const dbt_pg_fork_names[4];

#endif
