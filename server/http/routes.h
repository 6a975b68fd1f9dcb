/* bitflipd — route handlers (the table is in routes.c). */
#ifndef BFD_ROUTES_H
#define BFD_ROUTES_H

#include "http/http.h"

/* routes.c: the service itself */
void bfd_h_root(bfd *d, bfd_req *r);
void bfd_h_live(bfd *d, bfd_req *r);
void bfd_h_ready(bfd *d, bfd_req *r);
void bfd_h_metrics(bfd *d, bfd_req *r);
void bfd_h_openapi(bfd *d, bfd_req *r);

/* routes_items.c: models, datasets and error maps */
void bfd_h_item_upload(bfd *d, bfd_req *r);
void bfd_h_item_list(bfd *d, bfd_req *r);
void bfd_h_item_get(bfd *d, bfd_req *r);
void bfd_h_item_delete(bfd *d, bfd_req *r);

/* routes_campaigns.c */
void bfd_h_campaign_submit(bfd *d, bfd_req *r);
void bfd_h_campaign_list(bfd *d, bfd_req *r);
void bfd_h_campaign_get(bfd *d, bfd_req *r);
void bfd_h_campaign_events(bfd *d, bfd_req *r);
void bfd_h_campaign_results(bfd *d, bfd_req *r);
void bfd_h_campaign_cancel(bfd *d, bfd_req *r);
void bfd_h_campaign_delete(bfd *d, bfd_req *r);

/* routes_ui.c: the web page, its assets, the spec's schema, figures */
void bfd_h_ui_page(bfd *d, bfd_req *r);
void bfd_h_ui_app_js(bfd *d, bfd_req *r);
void bfd_h_ui_validate_js(bfd *d, bfd_req *r);
void bfd_h_ui_sse_js(bfd *d, bfd_req *r);
void bfd_h_ui_app_css(bfd *d, bfd_req *r);
void bfd_h_campaign_schema(bfd *d, bfd_req *r);
void bfd_h_campaign_figures(bfd *d, bfd_req *r);
void bfd_h_campaign_picture(bfd *d, bfd_req *r);

/* The tenant's campaign named by the path's {id} (routes_campaigns.c).
 * Returns 0, or -1 after replying 404 (or 500). */
int bfd_req_campaign(bfd *d, bfd_req *r, bfd_campaign_row *row);

/* Paging: `limit` (1..1000, default 100) and `page_token` (opaque: the last
 * seq seen). Returns 0 or replies 400. */
int bfd_paging(bfd_req *r, int *limit, int64_t *after);
/* The store's kind (BFD_MODEL, BFD_DATASET, BFD_ERRMAP) from the path. */
int bfd_req_kind(const bfd_req *r);

#endif
