/* Offline replay of a recorded trace through the emulation core, in simulated time.
 *
 * Each process (a stream of events, in the order it made them) replays as a closed loop: an event
 * starts when its process's previous event ended plus the gap recorded between them (the process's
 * own CPU time; scaled by cpu_scale). A call goes through dbt_emulate exactly as the interposer
 * sends it, so its device requests, counters and completion come from the same code. A sleep that a
 * wake from another process ended (a latch set by kill, a semaphore posted) ends when that wake
 * happens in the replay, plus the recorded wake-up delay: the waits between processes are kept as
 * dependencies, so a faster I/O worker or WAL flush shortens the wait of the process behind it.
 * An asynchronous call (libaio) does not hold its process: its request goes to the device when it was
 * submitted and completes among the others in flight, and the reap that waited for it (io_getevents, a
 * sleep depending on the call) ends at its replayed completion plus the recorded time the reap took
 * after the later of its start and that completion.
 * A sleep nobody in the trace ended (a timeout, a client's next query) keeps its recorded length.
 * A dependency holds only if the sleeper comes after the waker took what it waits for: a backend that,
 * faster in the replay, reaches a lock before its recorded holder woke up does not wait for it.
 * Processes are advanced in the order of their events' replayed start times (a discrete-event
 * simulation), so each device sees its requests as the live run would have issued them. */
#ifndef DBT_REPLAY_H
#define DBT_REPLAY_H

#include <stdatomic.h>
#include <stdint.h>

#include "emulate.h"
#include "objio.h"

/* Bounds on what one event may ask, so that no record of a damaged trace makes the replay run
 * unboundedly: a call moves at most a WAL segment's largest size (1 GiB: PostgreSQL writes no more in
 * one call); a read, or read-ahead advice, at most 16 MiB (PostgreSQL reads at most io_combine_limit,
 * 1 MiB: a buffered read whose pages are all still in flight makes the page cache's CLOCK sweep the
 * whole cache for each further page, so the work grows with the read times the cache); no byte
 * beyond 2^48 (well inside the page cache's and the chunk table's keys); times below 2^62 ns (146
 * years), so sums of them cannot wrap. */
#define DBT_REPLAY_MAX_LEN (1ull << 30)
#define DBT_REPLAY_MAX_READ (16ull << 20)
#define DBT_REPLAY_MAX_END (1ull << 48)
#define DBT_REPLAY_MAX_TIME (1ull << 62)
#define DBT_REPLAY_MAX_CPU_SCALE 1000.0
/* A call asks a queueing drive again each time it may have chosen; a drive's queue holds a few
 * dozen requests, so a call still waiting after this many asks is a fault, not a long queue. */
#define DBT_REPLAY_MAX_RESUMES (1u << 20)

/* One event of a process's stream, as the caller prepares it from the trace. */
struct dbt_replay_event {
    uint64_t t0, t1;   /* recorded: began; ended (a call: returned to the program) */
    uint64_t host_ns;  /* a call: the host call's own time, paid on any device */
    uint64_t late_ns;  /* a call: how late the live emulation returned it (part of what a live run costs) */
    uint64_t done_ns;  /* an asynchronous call (flags DBT_TF_ASYNC): its recorded completion */
    uint64_t off, len; /* a call: its bytes */
    uint64_t file_size; /* a read call: the file's size (UINT64_MAX unknown) */
    int64_t file;
    int64_t dep;       /* a sleep: the index of the wake that ended it (another process's), or of the
                          asynchronous call whose completion it reaped (any process's; a reap's, flags
                          DBT_SF_AIO, may be a call done at once in io_submit: a buffered one), or -1 */
    int64_t guard;     /* a sleep with a dep: the waker's sleep before its wake (-1: none). The waker has
                          been awake since then (holding what the sleeper waits for: a lock, its I/O); a
                          sleeper that comes before that, in the replay, finds nothing held and waits
                          for nothing */
    uint32_t stream;   /* the process */
    uint32_t aux;      /* a call: advice, sync_file_range flags */
    uint8_t kind;      /* DBT_TK_CALL or DBT_TK_SYNC */
    uint8_t op;        /* a call: enum dbt_trace_op; a sync: enum dbt_sync_op */
    uint8_t dev;       /* a call: the device its file is on in the replayed placement (or, for a replay
                          that places the calls itself, in the recorded run: see dbt_replay_options) */
    uint8_t flags;     /* a call: DBT_TF_DIRECT, DBT_TF_DSYNC, DBT_TF_ASYNC (its process went on once
                          its real I/O was done, t1; its completion ends the sleep that depends on it) */
    int32_t nudge_ns;  /* a call: how much later (> 0) or earlier (< 0) the core hears of it than its
                          host call's return, its own times unchanged: a race a live run could have had
                          (a process pre-empted between its host call and telling the core), for a
                          spread of replays. 0 as recorded */
};

/* The events of trace records (trace.h), as a replay takes them: out[i] from r[i], in stream stream[i]
 * with dependency dep[i] and guard guard[i]. A call keeps its times, its bytes, its file, its read's
 * file size (when known), its advice or flags (any other call), how it was opened (direct, dsync), its
 * recorded device, and what the host and the live emulation added to it: the host call's own time
 * (host_ns) and how late the call returned past what it waited for (late_ns). A sync keeps its
 * times, its op and its flags. */
void dbt_replay_events_of(const struct dbt_trace_rec *r, uint64_t n, const int64_t *stream, const int64_t *dep,
                          const int64_t *guard, struct dbt_replay_event *out);

/* One device request the replay issued, and the event that caused it. */
struct dbt_replay_request {
    struct dbt_request_event ev;
    uint64_t event;
};

struct dbt_replay_result {
    uint64_t *start, *end; /* per event, replayed (caller's arrays of n) */
    uint8_t *flags;        /* per event: a call's outcome flags (DBT_TF_PAGE_CACHE) */
    struct dbt_replay_request *requests; /* malloc'd; the caller frees with free() */
    uint64_t nrequests;
};

/* How a replay treats its events beyond what they say (dbt_replay_with).
 *   place: each call goes to the device its file is laid out on in the state (dbt_state_put_file),
 *          or, for a file not laid out, to the event's own device (its recorded one); a call keeps its
 *          late_ns only where it stays on its recorded device and that device is one of
 *          same_devices (bit d: device d keeps its recorded profile), since the live emulation's
 *          lateness belongs to the emulation of that device on that host. 0: the events are placed
 *          already (dev, late_ns as given).
 *   requests: the device requests are collected into out->requests.
 *   objects: may be NULL; else every device request is counted there as it is issued (its order:
 *          the order issued), and each read the page cache served whole against the event's own
 *          file and device (its order: 2^63 + the event's index). */
struct dbt_replay_options {
    int place;
    uint32_t same_devices;
    int requests;
    struct dbt_objio *objects;
};

/* Replays n events (grouped by stream, each stream in order) on state s. The recorded interval began
 * at `recorded_from`; its replay begins at `replay_from` (a stream's first event comes as long after
 * it as it came after the recorded start). `cancel` (may be NULL): another thread sets it to stop the
 * replay early. Returns 0; -1 with a message in err (a malformed event array, an event beyond the
 * bounds above); or -2 when cancelled. */
int dbt_replay(struct dbt_state *s, const struct dbt_replay_event *ev, uint64_t n, uint64_t recorded_from,
               uint64_t replay_from, double cpu_scale, const atomic_int *cancel, struct dbt_replay_result *out,
               char *err, size_t errlen);
/* The same, with options (NULL: as dbt_replay, the events as placed and the requests collected). */
int dbt_replay_with(struct dbt_state *s, const struct dbt_replay_event *ev, uint64_t n, uint64_t recorded_from,
                    uint64_t replay_from, double cpu_scale, const struct dbt_replay_options *opt,
                    const atomic_int *cancel, struct dbt_replay_result *out, char *err, size_t errlen);

#endif
