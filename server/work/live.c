/* Campaigns in memory and their event logs. */
#include "work/live.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


bf_status bfd_live_new(bfd_live **out, bf_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? BF_OK : bf_error_set(err, BF_ENOMEM, "out of memory");
}

void bfd_live_free(bfd_live *l)
{
    if (!l) return;
    for (bfd_camp *c = l->head, *n; c; c = n) {
        n = c->next;
        bfd_camp_free(c);
    }
    free(l);
}

bfd_camp *bfd_live_find(bfd_live *l, const char *id)
{
    for (bfd_camp *c = l->head; c; c = c->next)
        if (!strcmp(c->id, id)) return c;
    return NULL;
}

void bfd_camp_free(bfd_camp *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_ev; i++) free(c->ev[i].data);
    free(c->ev);
    if (c->have_acc) bf_campaign_result_free(&c->acc);
    json_decref(c->header);
    free(c->gates);
    free(c->chunk_done);
    free(c->chunk_prog);
    free(c->tenant);
    free(c);
}

static bfd_camp *camp_new(const bfd_campaign_row *row, const char *prefix)
{
    bfd_camp *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    int n = row->n_chunks > 0 ? row->n_chunks : 1;
    c->tenant = strdup(row->tenant);
    c->chunk_done = calloc((size_t)n, 1);
    c->chunk_prog = calloc((size_t)n, sizeof *c->chunk_prog);
    if (!c->tenant || !c->chunk_done || !c->chunk_prog) { bfd_camp_free(c); return NULL; }
    snprintf(c->id, sizeof c->id, "%s", row->id);
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    c->state = row->state;
    c->n_chunks = n;
    c->chunks_left = n;
    c->planned = row->trials_planned;
    c->next_seq = 1;
    if (row->gates_json) {
        json_t *g = json_loads(row->gates_json, 0, NULL);
        size_t k = json_array_size(g);
        c->gates = calloc(k + 1, sizeof *c->gates);
        if (!c->gates) { json_decref(g); bfd_camp_free(c); return NULL; }
        for (size_t i = 0; i < k; i++)   /* checked when the campaign was submitted */
            if (bf_gate_parse(json_string_value(json_array_get(g, i)), &c->gates[c->n_gates], NULL) == BF_OK) c->n_gates++;
        json_decref(g);
    }
    return c;
}

bfd_camp *bfd_live_add(bfd_live *l, const bfd_campaign_row *row, const char *prefix)
{
    bfd_camp *c = camp_new(row, prefix);
    if (!c) return NULL;
    c->registered = 1;
    c->next = l->head;
    l->head = c;
    return c;
}

static int append(bfd_camp *c, const char *type, json_t *data)
{
    char *s = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (!s) return -1;
    /* only the latest progress is kept: drop the one before */
    if (!strcmp(type, "progress"))
        for (size_t i = c->n_ev; i-- > 0;)
            if (!strcmp(c->ev[i].type, "progress")) {
                free(c->ev[i].data);
                memmove(&c->ev[i], &c->ev[i + 1], (c->n_ev - i - 1) * sizeof *c->ev);
                c->n_ev--;
                break;
            }
    if (c->n_ev == c->cap_ev) {
        size_t cap = c->cap_ev ? c->cap_ev * 2 : 8;
        bfd_event *e = realloc(c->ev, cap * sizeof *e);
        if (!e) { free(s); return -1; }
        c->ev = e;
        c->cap_ev = cap;
    }
    bfd_event *e = &c->ev[c->n_ev++];
    e->seq = c->next_seq++;
    snprintf(e->type, sizeof e->type, "%s", type);
    e->data = s;
    return 0;
}

void bfd_camp_event(bfd *d, bfd_camp *c, const char *type, json_t *data)
{
    if (append(c, type, data) != 0) bfd_log(d, "error", "campaign %s: out of memory recording a %s event", c->id, type);
    if (d->on_event) d->on_event(d, c);
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* {critical: {rate, ci}, due: {rate, ci}, half_width: {overall, per_tensor?, per_bit?}}
 * (docs/SERVICE.md): per_tensor and per_bit only when they are stop targets */
static json_t *intervals_json(const bfd_intervals *iv)
{
    json_t *hw = json_pack("{s:o}", "overall", num(iv->half_width[0]));
    if (hw && isfinite(iv->half_width[1])) json_object_set_new(hw, "per_tensor", json_real(iv->half_width[1]));
    if (hw && isfinite(iv->half_width[2])) json_object_set_new(hw, "per_bit", json_real(iv->half_width[2]));
    return json_pack("{s:{s:o, s:[o, o]}, s:{s:o, s:[o, o]}, s:o*}", "critical", "rate", num(iv->critical[0]), "ci",
                     num(iv->critical[1]), num(iv->critical[2]), "due", "rate", num(iv->due[0]), "ci", num(iv->due[1]),
                     num(iv->due[2]), "half_width", hw);
}

json_t *bfd_camp_progress(const bfd_camp *c)
{
    int64_t done = 0, o[BF_OUTCOME_COUNT] = {0};
    for (int i = 0; i < c->n_chunks; i++) {
        done += c->chunk_prog[i][0];
        for (int k = 0; k < BF_OUTCOME_COUNT; k++) o[k] += c->chunk_prog[i][1 + k];
    }
    json_t *oc = json_object();
    for (int k = 0; k < BF_OUTCOME_COUNT; k++) json_object_set_new(oc, bf_outcome_name((bf_outcome)k), json_integer(o[k]));
    json_t *p = json_pack("{s:I, s:I, s:f, s:o}", "trials_done", (json_int_t)done, "trials_planned", (json_int_t)c->planned,
                          "fraction", c->planned > 0 ? (double)done / (double)c->planned : 0.0, "outcomes", oc);
    if (p && c->iv.set) json_object_set_new(p, "intervals", intervals_json(&c->iv));
    return p;
}

bfd_camp *bfd_camp_replay(const bfd_campaign_row *row)
{
    bfd_camp *c = camp_new(row, "f");
    if (!c) return NULL;
    int ok = append(c, "state", json_pack("{s:s}", "state", bfd_state_name(row->state))) == 0;
    if (ok && row->result_json) {
        json_t *doc = json_loads(row->result_json, 0, NULL);
        /* the last progress, as a live stream ends with it, from the result */
        const json_t *sum = json_object_get(doc, "summary");
        int64_t done = json_integer_value(json_object_get(sum, "trials"));
        if (doc && sum)
            ok = append(c, "progress", json_pack("{s:I, s:I, s:f, s:O}", "trials_done", (json_int_t)done, "trials_planned",
                                                 (json_int_t)row->trials_planned, "fraction",
                                                 row->trials_planned > 0 ? (double)done / (double)row->trials_planned : 1.0,
                                                 "outcomes", json_object_get(sum, "outcomes"))) == 0;
        if (ok) ok = doc && append(c, "result", doc) == 0;   /* append takes doc */
        else json_decref(doc);
    }
    if (ok)
        ok = append(c, "end", json_pack("{s:s, s:s?, s:s?}", "state", bfd_state_name(row->state), "verdict", row->verdict,
                                        "error", row->error)) == 0;
    if (!ok) { bfd_camp_free(c); return NULL; }
    return c;
}

void bfd_live_drop(bfd *d, bfd_camp *c)
{
    if (c->registered) {
        for (bfd_camp **p = &d->live->head; *p; p = &(*p)->next)
            if (*p == c) { *p = c->next; break; }
        c->registered = 0;
        c->next = NULL;
    }
    if (!c->subs) bfd_camp_free(c);
}
