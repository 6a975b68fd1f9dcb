/* Which steps read each value of a plan, as lists (CSR, a step once per
 * input slot that holds the value): the index plan_csel.c's class
 * selections and ckpt_tail.c's detection tail look their patterns up in. */
#include "base/alloc.h"
#include "exec/plan_impl.h"

int bf__plan_readers_make(const bf_plan *p, bf__plan_readers *r)
{
    size_t nv = p->model->n_values;
    r->first = bf__calloc(nv + 2, sizeof *r->first);
    size_t total = 0;
    for (size_t i = 0; i < p->n_steps; i++) total += (size_t)p->steps[i].node->n_in;
    r->step = bf__calloc(total + 1, sizeof *r->step);
    if (!r->first || !r->step) return 0;
    for (size_t i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].node->n_in; j++)
            if (p->steps[i].node->in[j] >= 0) r->first[p->steps[i].node->in[j] + 2]++;
    for (size_t v = 0; v < nv; v++) r->first[v + 2] += r->first[v + 1];
    for (size_t i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].node->n_in; j++) {
            int v = p->steps[i].node->in[j];
            if (v >= 0) r->step[r->first[v + 1]++] = (int)i;
        }
    return 1;
}

void bf__plan_readers_free(bf__plan_readers *r)
{
    bf__free(r->first);
    bf__free(r->step);
    r->first = NULL;
    r->step = NULL;
}
