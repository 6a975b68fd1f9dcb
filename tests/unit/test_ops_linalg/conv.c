/* test_ops_linalg: Conv. */
#include "test_ops_linalg.h"

/* ------------------------------------------------------------------ Conv */

static void ref_conv(const wcfg *w, const bf_tensor *x, const bf_tensor *wt, const bf_tensor *b,
                     int64_t group, bf_tensor *y)
{
    int r = w->r;
    int64_t N = x->dims[0], C = x->dims[1], M = wt->dims[0], cg = C / group, mg = M / group;
    int64_t out[3], pb[3], pe[3];
    for (int i = 0; i < r; i++) ref_out_size(w, i, &out[i], &pb[i], &pe[i]);
    int64_t yd[5] = {N, M};
    for (int i = 0; i < r; i++) yd[2 + i] = out[i];
    *y = th_tensor_f32(NULL, 2 + r, yd);
    const float *X = x->data, *W = wt->data;
    float *Y = y->data;
    int64_t isp = numel(r, w->in), osp = numel(r, out), ksp = numel(r, w->k);
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t g = m / mg;
            int64_t o[3] = {0};
            do {
                double s = b ? ((const float *)b->data)[m] : 0.0;
                for (int64_t c = 0; c < cg; c++) {
                    int64_t kk[3] = {0};
                    do {
                        int64_t xi = 0, wi = 0, inside = 1;
                        for (int i = 0; i < r; i++) {
                            int64_t p = o[i] * w->s[i] - pb[i] + kk[i] * w->d[i];
                            if (p < 0 || p >= w->in[i]) inside = 0;
                            xi = xi * w->in[i] + p;
                            wi = wi * w->k[i] + kk[i];
                        }
                        if (inside)
                            s += (double)X[(n * C + g * cg + c) * isp + xi] * W[(m * cg + c) * ksp + wi];
                    } while (next_index(kk, w->k, r));
                }
                int64_t oi = 0;
                for (int i = 0; i < r; i++) oi = oi * out[i] + o[i];
                Y[(n * M + m) * osp + oi] = (float)s;
            } while (next_index(o, out, r));
        }
}

typedef struct conv_case {
    wcfg w;
    int64_t n, c, m, group;
    int bias, kernel_attr;
} conv_case;

void conv_random(void **state)
{
    (void)state;
    conv_case cases[] = {
        /* 2-D: 3x3 pad 1, bias */
        {{2, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 2, 4, 6, 1, 1, 1},
        /* 1x1 stride 1: the pointwise fast path, grouped */
        {{2, {5, 7}, {1, 1}, {1, 1}, {1, 1}, {0}, NULL, 0}, 2, 6, 4, 2, 1, 0},
        /* strided, dilated, asymmetric pads, no bias */
        {{2, {11, 10}, {3, 2}, {2, 3}, {2, 1}, {1, 0, 2, 1}, NULL, 0}, 1, 3, 5, 1, 0, 1},
        /* depthwise with multiplier 2, stride 2 (im2col) */
        {{2, {10, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 2, 4, 8, 4, 1, 1},
        /* depthwise stride 1 dilation 2 */
        {{2, {8, 8}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, NULL, 0}, 1, 3, 3, 3, 1, 0},
        /* 1-D */
        {{1, {20}, {5}, {2}, {1}, {2, 1}, NULL, 0}, 2, 3, 4, 1, 1, 1},
        {{1, {16}, {3}, {1}, {3}, {0, 0}, NULL, 0}, 1, 4, 4, 2, 0, 0},
        /* 3-D */
        {{3, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}, NULL, 0}, 2, 2, 3, 1, 1, 1},
        /* auto_pad */
        {{2, {7, 9}, {3, 4}, {2, 2}, {1, 1}, {0}, "SAME_UPPER", 0}, 1, 2, 3, 1, 1, 1},
        {{2, {7, 9}, {3, 4}, {2, 2}, {1, 1}, {0}, "SAME_LOWER", 0}, 1, 2, 3, 1, 1, 1},
        {{2, {7, 9}, {3, 4}, {2, 3}, {1, 1}, {0}, "VALID", 0}, 1, 2, 3, 1, 0, 1},
        {{1, {13}, {4}, {3}, {2}, {0}, "SAME_UPPER", 0}, 1, 2, 2, 1, 1, 0},
        /* 1x1 stride 2: im2col gathers */
        {{2, {6, 6}, {1, 1}, {2, 2}, {1, 1}, {0}, NULL, 0}, 1, 3, 2, 1, 1, 1},
        /* a larger layer: 32 -> 64, 3x3 over 14x14 */
        {{2, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 2, 32, 64, 1, 1, 1},
        /* direct depthwise path: 5 wide, stride 2; kernel wider than the input
         * (no interior columns); 3-D. And a one-channel 1-D first layer. */
        {{2, {6, 12}, {3, 5}, {1, 2}, {1, 1}, {1, 2, 1, 2}, NULL, 0}, 2, 3, 3, 3, 1, 1},
        {{1, {10}, {3}, {1}, {1}, {1, 1}, NULL, 0}, 1, 1, 4, 1, 1, 1},
        {{2, {4, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 0}, 1, 2, 2, 2, 1, 1},
        {{3, {4, 5, 6}, {2, 3, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 1}, NULL, 0}, 1, 2, 2, 2, 1, 1},
        /* huge pads: outputs wholly in the padding equal the bias */
        {{2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {3, 3, 3, 3}, NULL, 0}, 1, 2, 2, 1, 1, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        conv_case *cc = &cases[ci];
        wcfg *w = &cc->w;
        int64_t xd[5] = {cc->n, cc->c}, wd[5] = {cc->m, cc->c / cc->group};
        for (int i = 0; i < w->r; i++) xd[2 + i] = w->in[i], wd[2 + i] = w->k[i];
        bf_tensor x = th_tensor_rand(100 + ci, 2 + w->r, xd), wt = th_tensor_rand(200 + ci, 2 + w->r, wd);
        bf_tensor b = th_tensor_rand(300 + ci, 1, &cc->m);
        bf__attr at[6];
        int na = set_window_attrs(w, at, cc->kernel_attr, 1);
        at[na++] = th_attr_int("group", cc->group);
        const bf_tensor *in[3] = {&x, &wt, cc->bias ? &b : NULL};
        bf_tensor want;
        ref_conv(w, &x, &wt, cc->bias ? &b : NULL, cc->group, &want);
        expect_close("Conv", at, (size_t)na, in, cc->bias ? 3 : 2, &want, TOL_ATOL, TOL_RTOL);
        th_tensor_free(&want), th_tensor_free(&x), th_tensor_free(&wt), th_tensor_free(&b);
    }
}

void conv_hand(void **state)
{
    (void)state;
    /* X = 1..9 as 3x3, W = ones 2x2, bias 1, no pad:
     * [1+2+4+5, 2+3+5+6; 4+5+7+8, 5+6+8+9] + 1 = [13, 17; 25, 29] */
    float xv[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[] = {1, 1, 1, 1}, bv[] = {1}, yv[] = {13, 17, 25, 29};
    int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 1, 2, 2}, bd[1] = {1}, yd[4] = {1, 1, 2, 2};
    bf_tensor x = th_tensor_f32(xv, 4, xd), wt = th_tensor_f32(wv, 4, wd), b = th_tensor_f32(bv, 1, bd);
    bf_tensor want = th_tensor_f32(yv, 4, yd);
    const bf_tensor *in[3] = {&x, &wt, &b};
    expect_close("Conv", NULL, 0, in, 3, &want, 0, 0);
    /* stride 2, pads 1: windows at (-1,-1),(-1,1),(1,-1),(1,1) cover
     * {1}, {2,3}, {4,7}, {5,6,8,9}: [1, 5; 11, 28] + 1 */
    float y2[] = {2, 6, 12, 29};
    bf_tensor want2 = th_tensor_f32(y2, 4, yd);
    int64_t s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
    bf__attr at[2] = {th_attr_ints("strides", s2, 2), th_attr_ints("pads", p1, 4)};
    expect_close("Conv", at, 2, in, 3, &want2, 0, 0);
    th_tensor_free(&x), th_tensor_free(&wt), th_tensor_free(&b), th_tensor_free(&want), th_tensor_free(&want2);
}

void conv_errors(void **state)
{
    (void)state;
    int64_t xd[4] = {1, 4, 5, 5}, wd[4] = {6, 2, 3, 3}, bd[1] = {5}, w3[3] = {6, 4, 3}, x5[4] = {1, 4, 2, 2};
    bf_tensor x = th_tensor_rand(1, 4, xd), wt = th_tensor_rand(2, 4, wd), b = th_tensor_rand(3, 1, bd);
    bf_tensor wbad = th_tensor_rand(4, 3, w3), xs = th_tensor_rand(5, 4, x5);
    const bf_tensor *in[2] = {&x, &wt};
    /* W has C/group = 2 but group defaults to 1 with C = 4 */
    expect_error("Conv", NULL, 0, in, 2, 1, BF_ESHAPE, "C/group = 4");
    bf__attr g3[1] = {th_attr_int("group", 3)};
    expect_error("Conv", g3, 1, in, 2, 1, BF_EFORMAT, "'group' is 3");
    bf__attr g2[2] = {th_attr_int("group", 2), th_attr_string("auto_pad", "SAME")};
    expect_error("Conv", g2, 2, in, 2, 1, BF_EFORMAT, "SAME_UPPER");
    int64_t k2[2] = {2, 2};
    bf__attr ks[2] = {th_attr_int("group", 2), th_attr_ints("kernel_shape", k2, 2)};
    expect_error("Conv", ks, 2, in, 2, 1, BF_ESHAPE, "W has 3");
    int64_t s1[1] = {1};
    bf__attr st1[2] = {th_attr_int("group", 2), th_attr_ints("strides", s1, 1)};
    expect_error("Conv", st1, 2, in, 2, 1, BF_EFORMAT, "'strides' has 1 values; expected 2");
    const bf_tensor *inb[3] = {&x, &wt, &b};
    expect_error("Conv", g2, 1, inb, 3, 1, BF_ESHAPE, "input B has shape [5]; expected [M] = [6]");
    const bf_tensor *inw[2] = {&x, &wbad};
    expect_error("Conv", NULL, 0, inw, 2, 1, BF_ESHAPE, "same rank");
    const bf_tensor *ins[2] = {&xs, &wt};
    expect_error("Conv", g2, 1, ins, 2, 1, BF_ESHAPE, "smaller than the kernel extent 3");
    const bf_tensor *inn[2] = {&x, NULL};
    expect_error("Conv", NULL, 0, inn, 2, 1, BF_EFORMAT, "input W is required");
    th_tensor_free(&x), th_tensor_free(&wt), th_tensor_free(&b), th_tensor_free(&wbad), th_tensor_free(&xs);
}
