/* The outbox (work/outbox.h). */
#include "work/outbox.h"

#include <stdio.h>
#include <stdlib.h>

bfd_msg *bfd_msg_new(bfd_msg_kind kind, const char *id, int chunk)
{
    bfd_msg *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->kind = kind;
    snprintf(m->id, sizeof m->id, "%s", id);
    m->chunk = chunk;
    return m;
}

void bfd_msg_free(bfd_msg *m)
{
    while (m) {
        bfd_msg *n = m->next;
        free(m->result_json);
        free(m->error);
        free(m);
        m = n;
    }
}

void bfd_outbox_init(bfd_outbox *ob, uv_async_t *wake)
{
    ob->head = ob->tail = NULL;
    ob->wake = wake;
}

void bfd_outbox_post(bfd_outbox *ob, bfd_msg *m)
{
    if (!m) return;
    m->next = NULL;
    if (ob->tail) ob->tail->next = m;
    else ob->head = m;
    ob->tail = m;
    uv_async_send(ob->wake);
}

bfd_msg *bfd_outbox_take(bfd_outbox *ob)
{
    bfd_msg *m = ob->head;
    ob->head = ob->tail = NULL;
    return m;
}

void bfd_outbox_clear(bfd_outbox *ob)
{
    bfd_msg_free(bfd_outbox_take(ob));
}
