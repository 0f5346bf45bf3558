/* Linux AIO on emulated devices (libaio's io_submit and io_getevents, or the same system calls made
 * through syscall()): a request on a device file does its real I/O when it is submitted, and its
 * completion comes from the emulation core as if it had waited at the device among the others in
 * flight (a queueing drive reorders them, a flash drive serves them on its channels); io_getevents
 * hands it back no sooner. This part holds one context's requests in flight and chooses what a reap
 * returns. Like the core it has no clock: the interposer gives it the times, and so does its C test
 * (tests/native/test_aioq.c), which checks a hand-computed queue. */
#ifndef DBT_AIOQ_H
#define DBT_AIOQ_H

#include <stdint.h>

#include "emulate.h"

/* struct io_event's layout (linux/aio_abi.h), what io_getevents returns for a request */
struct dbt_aio_event {
    uint64_t data, obj;
    int64_t res, res2;
};

/* Room for the caller's own per-request record (the interposer's trace of the call). */
#define DBT_AIO_SCRATCH 128

struct dbt_aio_req {
    struct dbt_call call;     /* as the core was asked: t0 the submission, host_end the real I/O's end */
    struct dbt_outcome out;   /* while out.ticket: the drive has not chosen it yet; ask again at out.complete */
    struct dbt_aio_event ev;  /* what the reap returns */
    uint64_t done;            /* when it completes (valid once out.ticket is 0) */
    uint8_t at_once;          /* done in io_submit (buffered) and traced there as a call that ended at done */
    struct dbt_aio_req *next;
    _Alignas(16) unsigned char scratch[DBT_AIO_SCRATCH];
};

/* One context's requests in flight. Not locked here: the caller serialises a context's calls. */
struct dbt_aio_queue {
    struct dbt_aio_req *inflight, *spare;
    uint32_t count;
};

/* When a request the drive has chosen (no ticket) is the program's again: the model's completion, never
 * before its real I/O ended; a call the core did not charge, or made nobody wait for, at that end. The
 * offline replay (replay.c) completes an asynchronous call by the same rule. */
static inline uint64_t dbt_aio_completion(const struct dbt_outcome *o, uint64_t host_end) {
    uint64_t t = o->charged && o->wait ? o->complete : host_end;
    return t > host_end ? t : host_end;
}

/* A request to fill (call, ev, scratch) and submit; NULL when no memory is left. */
struct dbt_aio_req *dbt_aio_new(struct dbt_aio_queue *q);

/* Emulates the request's call at call.t0 without waiting and keeps it in flight. The hooks' ctx is
 * the request's scratch (for its requests' records). A call the core does not charge (paused) or
 * makes nobody wait for completes when its real I/O ended. */
void dbt_aio_submit(struct dbt_aio_queue *q, struct dbt_state *s, struct dbt_aio_req *r,
                    const struct dbt_emulate_hooks *hooks);

/* Keeps a request that needs no emulation (an error, a paused call, one done at submission) in
 * flight until `done`. */
void dbt_aio_submit_done(struct dbt_aio_queue *q, struct dbt_aio_req *r, uint64_t done);

/* As of `now`: the drive's choices due are made (the requests still in a queueing drive's queue are
 * asked again), then up to `max` completed requests leave the queue, the earliest first, into out[]
 * (the caller records them and gives them back with dbt_aio_release). Returns how many; *next is when
 * the first request still in flight may complete (UINT64_MAX: none is). */
uint32_t dbt_aio_reap(struct dbt_aio_queue *q, struct dbt_state *s, const struct dbt_emulate_hooks *hooks,
                      uint64_t now, uint32_t max, struct dbt_aio_req **out, uint64_t *next);

void dbt_aio_release(struct dbt_aio_queue *q, struct dbt_aio_req *r);

/* Every request dropped (the context destroyed: its I/O was done when submitted), memory freed. */
void dbt_aio_clear(struct dbt_aio_queue *q);

#endif
