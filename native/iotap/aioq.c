/* A context's asynchronous requests in flight. See aioq.h. */
#include "aioq.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct dbt_aio_req *dbt_aio_new(struct dbt_aio_queue *q) {
    struct dbt_aio_req *r = q->spare;
    if (r) q->spare = r->next;
    else if (!(r = malloc(sizeof *r))) return NULL;
    memset(r, 0, offsetof(struct dbt_aio_req, scratch));
    return r;
}

void dbt_aio_release(struct dbt_aio_queue *q, struct dbt_aio_req *r) {
    r->next = q->spare;
    q->spare = r;
}

static struct dbt_emulate_hooks hooks_of(const struct dbt_emulate_hooks *hooks, struct dbt_aio_req *r) {
    struct dbt_emulate_hooks h = {NULL, NULL, r->scratch};
    if (hooks) {
        h.request = hooks->request;
        h.file_size = hooks->file_size;
    }
    return h;
}

/* Once the drive has chosen (no ticket): when the program may have it back. */
static void settle(struct dbt_aio_req *r) { r->done = dbt_aio_completion(&r->out, r->call.host_end); }

void dbt_aio_submit(struct dbt_aio_queue *q, struct dbt_state *s, struct dbt_aio_req *r,
                    const struct dbt_emulate_hooks *hooks) {
    struct dbt_emulate_hooks h = hooks_of(hooks, r);
    dbt_emulate(s, &r->call, &h, &r->out);
    if (!r->out.ticket) settle(r);
    r->next = q->inflight;
    q->inflight = r;
    q->count++;
}

void dbt_aio_submit_done(struct dbt_aio_queue *q, struct dbt_aio_req *r, uint64_t done) {
    r->out.ticket = 0;
    r->done = done;
    r->next = q->inflight;
    q->inflight = r;
    q->count++;
}

/* The request in flight whose next time (its completion, or when to ask the drive again) is earliest,
 * and the link that points at it. */
static struct dbt_aio_req **earliest(struct dbt_aio_queue *q, int tickets) {
    struct dbt_aio_req **best = NULL;
    for (struct dbt_aio_req **p = &q->inflight; *p; p = &(*p)->next) {
        if (tickets != ((*p)->out.ticket != 0)) continue;
        uint64_t t = tickets ? (*p)->out.complete : (*p)->done;
        if (!best || t < (tickets ? (*best)->out.complete : (*best)->done)) best = p;
    }
    return best;
}

uint32_t dbt_aio_reap(struct dbt_aio_queue *q, struct dbt_state *s, const struct dbt_emulate_hooks *hooks,
                      uint64_t now, uint32_t max, struct dbt_aio_req **out, uint64_t *next) {
    /* The drive's choices in time order: each ask makes the choices due by its time, so asking the
     * earliest first lets the later ones see the drive as it was then. */
    struct dbt_aio_req **p;
    while ((p = earliest(q, 1)) && (*p)->out.complete <= now) {
        struct dbt_aio_req *r = *p;
        struct dbt_emulate_hooks h = hooks_of(hooks, r);
        uint64_t asked = r->out.complete;
        dbt_emulate_resume(s, &r->call, &h, asked, &r->out);
        if (!r->out.ticket) settle(r);
        else if (r->out.complete <= asked) r->out.complete = asked + 1; /* no earlier than it was asked */
    }
    uint32_t n = 0;
    while (n < max && (p = earliest(q, 0)) && (*p)->done <= now) {
        struct dbt_aio_req *r = *p;
        *p = r->next;
        q->count--;
        out[n++] = r;
    }
    *next = UINT64_MAX;
    for (struct dbt_aio_req *r = q->inflight; r; r = r->next) {
        uint64_t t = r->out.ticket ? r->out.complete : r->done;
        if (t < *next) *next = t;
    }
    return n;
}

static void free_list(struct dbt_aio_req *r) {
    while (r) {
        struct dbt_aio_req *n = r->next;
        free(r);
        r = n;
    }
}

void dbt_aio_clear(struct dbt_aio_queue *q) {
    free_list(q->inflight);
    free_list(q->spare);
    q->inflight = q->spare = NULL;
    q->count = 0;
}
