/* Command queueing (SATA NCQ, SCSI TCQ): a drive of a kind that reorders holds several commands
 * and, whenever it is free, starts the one it reaches soonest, by its kind's own estimate. See
 * devmodel.h. Units inside: nanoseconds and bytes. */
#include "devkind.h"

/* ---- Command queueing: what the drive knows when it chooses among its queued commands. */

/* The kind's ops, when it reorders (DBT_CAP_REORDERS), else NULL. */
static const struct dbt_device_ops *reordering(const struct dbt_model_state *st) {
    const struct dbt_device_ops *ops = dbt_model_sane(st) ? dbt_ops_by_kind(st->kind) : NULL;
    return ops && (ops->caps & DBT_CAP_REORDERS) ? ops : NULL;
}

static int queue_depth(const struct dbt_model_state *st) {
    const struct dbt_device_ops *ops = reordering(st);
    if (!ops) return 1;
    int q = ops->queue_depth(&st->drive[0]);
    return q >= 1 && q <= DBT_MAX_QUEUE_DEPTH ? q : 1;
}

/* When the drive can begin rq: it has arrived, and the members it needs are done with their commands. */
static uint64_t model_ready(const struct dbt_model_state *st, const struct dbt_request *rq) {
    uint64_t t = rq->arrival_ns;
    const struct dbt_device_ops *ops = reordering(st);
    if (!ops) return t;
    int used[DBT_MAX_MEMBERS];
    uint64_t lo[DBT_MAX_MEMBERS], hi[DBT_MAX_MEMBERS];
    dbt_model_split(st, rq, used, lo, hi);
    for (int m = 0; m < st->members; m++) {
        uint64_t free_at = used[m] ? ops->free_at(&st->drive[m]) : 0;
        if (free_at > t) t = free_at;
    }
    return t;
}

/* How long rq would take begun at t: the slowest member's part. */
static uint64_t model_estimate(const struct dbt_model_state *st, const struct dbt_request *rq, uint64_t t) {
    const struct dbt_device_ops *ops = reordering(st);
    if (!ops) return 0;
    int used[DBT_MAX_MEMBERS];
    uint64_t lo[DBT_MAX_MEMBERS], hi[DBT_MAX_MEMBERS], worst = 0;
    dbt_model_split(st, rq, used, lo, hi);
    for (int m = 0; m < st->members; m++) {
        if (!used[m]) continue;
        struct dbt_request part = {rq->arrival_ns, lo[m], (uint32_t)(hi[m] - lo[m]), rq->op};
        uint64_t e = ops->estimate(&st->drive[m], st->members > 1 ? &part : rq, t);
        if (e > worst) worst = e;
    }
    return worst;
}


/* ---- The command queue (see devmodel.h). */

int dbt_model_queueing(const struct dbt_model_state *st) { return queue_depth(st) > 1; }

static struct dbt_request queued_rq(const struct dbt_queued *q) {
    return (struct dbt_request){q->arrival, q->addr, q->len, q->op};
}

/* The drive's next choice among the waiting requests, and when it makes it; -1 if none waits. */
static int q_choose(const struct dbt_model_state *st, uint64_t *at, int *passed_over) {
    int order[DBT_QUEUED_REQUESTS], n = 0;
    for (int i = 0; i < DBT_QUEUED_REQUESTS; i++) {
        if (!st->q[i].ticket || st->q[i].started) continue;
        int j = n++; /* insertion by ticket: the oldest first */
        while (j > 0 && st->q[order[j - 1]].ticket > st->q[i].ticket) order[j] = order[j - 1], j--;
        order[j] = i;
    }
    if (!n) return -1;
    int window = queue_depth(st) * st->members;
    if (window > n) window = n;
    uint64_t ready[DBT_QUEUED_REQUESTS], when = UINT64_MAX;
    for (int w = 0; w < window; w++) {
        struct dbt_request rq = queued_rq(&st->q[order[w]]);
        ready[w] = model_ready(st, &rq);
        if (ready[w] < when) when = ready[w];
    }
    int best = 0;
    uint64_t best_cost = UINT64_MAX;
    for (int w = 0; w < window; w++) {
        if (ready[w] > when) continue;
        struct dbt_request rq = queued_rq(&st->q[order[w]]);
        uint64_t cost = model_estimate(st, &rq, when);
        if (cost < best_cost) best = w, best_cost = cost;
    }
    *passed_over = 0;
    for (int w = 0; w < best; w++) /* an older request that had come: the drive took this one first */
        if (st->q[order[w]].arrival <= when) *passed_over = 1;
    *at = when;
    return order[best];
}

static void q_start(struct dbt_model_state *st, int i, int passed_over, dbt_started_fn started, void *ctx) {
    struct dbt_queued *q = &st->q[i];
    struct dbt_request rq = queued_rq(q);
    struct dbt_result res;
    dbt_model_submit(st, &rq, &res);
    q->start = res.start_ns;
    q->complete = res.complete_ns;
    q->rflags = res.flags;
    q->started = 1;
    q->reordered = (uint8_t)passed_over;
    st->q_waiting--;
    if (started) started(ctx, &rq, &res);
}

uint64_t dbt_model_run(struct dbt_model_state *st, uint64_t now, dbt_started_fn started, void *ctx) {
    while (st->q_waiting && st->q_count <= DBT_QUEUED_REQUESTS) {
        uint64_t at;
        int passed_over, i = q_choose(st, &at, &passed_over);
        if (i < 0) break;
        if (at > now) return at;
        q_start(st, i, passed_over, started, ctx);
    }
    return UINT64_MAX;
}

/* A started entry nobody took within STALE_NS of its completion (its issuer was killed) is taken
 * back when the queue needs room. */
#define STALE_NS 10000000000ull

uint64_t dbt_model_enqueue(struct dbt_model_state *st, const struct dbt_request *rq) {
    struct dbt_queued *q = NULL, *stale = NULL;
    for (int i = 0; i < DBT_QUEUED_REQUESTS && !q; i++) {
        if (!st->q[i].ticket) q = &st->q[i];
        else if (!stale && st->q[i].started && st->q[i].complete + STALE_NS < rq->arrival_ns) stale = &st->q[i];
    }
    if (!q && stale) {
        q = stale;
        st->q_count--;
    }
    if (!q) return 0;
    *q = (struct dbt_queued){++st->q_next_ticket, rq->arrival_ns, rq->addr, 0, 0, rq->len, 0, rq->op, 0, 0, {0}};
    st->q_count++;
    st->q_waiting++;
    return q->ticket;
}

int dbt_model_take(struct dbt_model_state *st, uint64_t ticket, struct dbt_result *res, int *reordered) {
    for (int i = 0; i < DBT_QUEUED_REQUESTS; i++) {
        struct dbt_queued *q = &st->q[i];
        if (!ticket || q->ticket != ticket) continue;
        if (!q->started) return 0;
        *res = (struct dbt_result){.start_ns = q->start, .complete_ns = q->complete, .flags = q->rflags};
        *reordered = q->reordered;
        q->ticket = 0;
        st->q_count--;
        return 1;
    }
    return -1;
}

void dbt_model_submit_now(struct dbt_model_state *st, const struct dbt_request *rq, struct dbt_result *out,
                          dbt_started_fn started, void *ctx) {
    uint64_t ticket = st->q_waiting && rq->op != DBT_OP_FLUSH ? dbt_model_enqueue(st, rq) : 0;
    if (!ticket) {
        if (!(rq->op == DBT_OP_FLUSH && st->flush_ignored)) /* an ignored flush waits for no queue either */
            (void)dbt_model_run(st, UINT64_MAX, started, ctx);
        dbt_model_submit(st, rq, out);
        if (started) started(ctx, rq, out);
        return;
    }
    int reordered;
    while (dbt_model_take(st, ticket, out, &reordered) == 0) {
        uint64_t at;
        int passed_over, i = q_choose(st, &at, &passed_over);
        q_start(st, i, passed_over, started, ctx);
    }
}

