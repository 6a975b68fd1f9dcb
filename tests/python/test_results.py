"""Result.to_pandas, Trials.to_pandas and bitflip.plot, checked against the trial
records and the documented formulas by arithmetic done here (local runs)."""
import math

import pytest

import bitflip
from conftest import ber_spec, digits_spec

Z95 = 1.959963984540054


def wilson(k, n, z=Z95):
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


@pytest.fixture(scope="module")
def flips():
    return bitflip.run(digits_spec(trials=400, seed=21), threads=2)


@pytest.fixture(scope="module")
def sweep():
    return bitflip.run(ber_spec(mitigations=["clip", "sbp", {"name": "abft", "abft": {"mode": "correct"}}]),
                       threads=2)


def test_outcomes_table(flips):
    df = flips.to_pandas()
    assert list(df["outcome"]) == ["masked", "tolerable", "critical", "due"]
    recs = list(flips.trials)
    assert len(recs) == 400
    for _, row in df.iterrows():
        k = sum(t["outcome"] == row["outcome"] for t in recs)
        assert row["count"] == k
        assert row["rate"] == pytest.approx(k / 400)
        lo, hi = wilson(k, 400)
        assert row["lo"] == pytest.approx(lo, abs=1e-9) and row["hi"] == pytest.approx(hi, abs=1e-9)


def test_tensor_and_bit_tables_tally_the_trials(flips):
    trials = flips.trials.to_pandas()
    assert len(trials) == 400 and trials["trial"].tolist() == list(range(400))
    tensors = flips.to_pandas("tensors").set_index("tensor")
    assert set(tensors.index) == {s["name"] for s in flips.doc["campaign"]["sites"]}
    for name, row in tensors.iterrows():
        mine = trials[trials["tensor"] == name]
        assert row["trials"] == len(mine)
        for k in ("masked", "tolerable", "critical", "due"):
            assert row[k] == (mine["outcome"] == k).sum()
        if len(mine):
            assert row["critical_rate"] == pytest.approx((mine["outcome"] == "critical").mean())
            lo, hi = wilson(int((mine["outcome"] == "critical").sum()), len(mine))
            assert row["critical_lo"] == pytest.approx(lo, abs=1e-9)
    assert tensors.loc["fc.weight", "torch_name"] == "fc.weight"
    bits = flips.to_pandas("bits").set_index("bit")
    first_bit = trials["bits"].map(lambda b: b[0])
    for b, row in bits.iterrows():
        assert row["trials"] == (first_bit == b).sum()
        assert row["critical"] == ((first_bit == b) & (trials["outcome"] == "critical")).sum()
    assert bits["trials"].sum() == 400


def test_metrics_table(flips):
    trials = flips.trials.to_pandas()
    m = flips.to_pandas("metrics").set_index("metric")
    acc = trials["accuracy"]
    assert m.loc["accuracy", "n"] == 400
    assert m.loc["accuracy", "mean"] == pytest.approx(acc.mean())
    assert m.loc["accuracy", "std"] == pytest.approx(acc.std(ddof=1))
    assert m.loc["accuracy", "golden"] == flips.golden["accuracy"]
    assert m.loc["accuracy", "lo"] <= acc.mean() <= m.loc["accuracy", "hi"]


def test_rates_table_is_the_mean_per_rate(sweep):
    trials = sweep.trials.to_pandas()
    none = trials[trials["mitigation"] == "none"]
    rates = sweep.to_pandas("rates")
    assert rates["rate"].tolist() == [1e-5, 1e-4, 1e-3]
    for _, row in rates.iterrows():
        mine = none[none["rate"] == row["rate"]]
        assert row["trials"] == len(mine) == 8
        assert row["auc_mean"] == pytest.approx(mine["auc"].mean(), rel=1e-12)
        assert row["auc_std"] == pytest.approx(mine["auc"].std(ddof=1), rel=1e-9, abs=1e-15)
        assert row["critical"] == (mine["outcome"] == "critical").sum()
        assert row["auc_lo"] <= row["auc_mean"] <= row["auc_hi"]


def test_mitigation_tables_recompute_the_recovery(sweep):
    trials = sweep.trials.to_pandas()
    mit = sweep.to_pandas("mitigations").set_index("name")
    assert list(mit.index) == ["none", "clip", "sbp", "abft"]
    golden = sweep.golden["auc"]
    faulty = trials[trials["mitigation"] == "none"]["auc"].mean()
    for name, row in mit.iterrows():
        mine = trials[trials["mitigation"] == name]
        assert len(mine) == 24
        assert row["mitigated"] == pytest.approx(mine["auc"].mean())
        assert row["faulty"] == pytest.approx(faulty)
        assert row["critical_rate"] == pytest.approx((mine["outcome"] == "critical").mean())
        if name == "none":
            assert math.isnan(row["recovery"])
        else:
            assert row["recovery"] == pytest.approx((mine["auc"].mean() - faulty) / (golden - faulty))
            assert row["recovery_lo"] <= row["recovery"] + 1e-12 <= row["recovery_hi"] + 2e-12
    per_rate = sweep.to_pandas("mitigation_rates")
    assert len(per_rate) == 4 * 3
    sbp = per_rate[(per_rate["name"] == "sbp") & (per_rate["rate"] == 1e-3)].iloc[0]
    base = trials[(trials["mitigation"] == "none") & (trials["rate"] == 1e-3)]["auc"].mean()
    mine = trials[(trials["mitigation"] == "sbp") & (trials["rate"] == 1e-3)]["auc"].mean()
    assert sbp["recovery"] == pytest.approx((mine - base) / (golden - base))
    assert set(sweep.tables()) == {"outcomes", "metrics", "tensors", "rates", "mitigations",
                                   "mitigation_rates"}


def test_plots(flips, sweep, tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    ax = bitflip.plot.metric_vs_ber(sweep)
    assert len(ax.get_lines()) == 4 + 1                 # a curve per protection, the golden line
    assert len(ax.collections) == 4                     # a band each
    assert ax.get_xscale() == "log" and "auc" in ax.get_ylabel()
    none = ax.get_lines()[0]
    assert list(none.get_ydata()) == pytest.approx(sweep.to_pandas("rates")["auc_mean"].tolist())
    ax = bitflip.plot.metric_vs_ber({"a": sweep, "b": sweep}, protections=False, golden=False)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    ax = bitflip.plot.layer_vulnerability(flips)
    hit = flips.to_pandas("tensors").query("trials > 0")
    assert len(ax.patches) == len(hit)
    assert max(p.get_width() for p in ax.patches) == pytest.approx(hit["critical_rate"].max())
    ax = bitflip.plot.bit_vulnerability(flips)
    assert len(ax.patches) == len(flips.to_pandas("bits"))
    ax = bitflip.plot.mitigation_recovery(sweep)
    assert len(ax.patches) == 3 * 3
    with pytest.raises(bitflip.BitflipError, match="BER sweep"):
        bitflip.plot.metric_vs_ber(flips)
    with pytest.raises(bitflip.BitflipError, match="no mitigations"):
        bitflip.plot.mitigation_recovery(flips)
    for res, name in ((flips, "flips.png"), (sweep, "sweep.png")):
        fig = bitflip.plot.summary(res, tmp_path / name)
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        plt.close(fig)
    plt.close("all")


def test_unknown_table(flips):
    with pytest.raises(bitflip.BitflipError, match="tables are outcomes"):
        flips.to_pandas("nope")


def test_missing_pandas_names_the_debian_package(flips, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="python3-pandas"):
        flips.to_pandas()


def test_ivmod_columns_of_a_detection_result():
    """A detection campaign's tensor and bit tables carry IVMOD: the trials'
    critical images (changed_predictions) summed by hand, over trials x images."""
    from conftest import FIX
    one = f"{FIX}/onesample"
    det = bitflip.run({"model": f"{one}/onesample_dyn.onnx", "dataset": f"{one}/onesample_det.eval.safetensors",
                       "trials": 30, "seed": 5, "faults": {"target": "weights", "model": "bitflip"}})
    trials = det.trials.to_pandas()
    samples = det.doc["golden"]["samples"]
    tensors = det.to_pandas("tensors").set_index("tensor")
    assert trials["changed_predictions"].sum() > 0
    for name, row in tensors.iterrows():
        mine = trials[trials["tensor"] == name]
        assert row["critical_images"] == mine["changed_predictions"].sum()
        assert row["images"] == len(mine) * samples
        if len(mine):
            assert row["ivmod"] == pytest.approx(mine["changed_predictions"].sum() / (len(mine) * samples))
    bits = det.to_pandas("bits")
    assert bits["critical_images"].sum() == trials["changed_predictions"].sum()
    assert "ivmod" not in bitflip.run(digits_spec(trials=20, seed=3)).to_pandas("tensors").columns


def test_adaptive_columns_weights_n_eff_pvf():
    """An adaptive run's stratified fields: each tensor's weight is its share of the
    elements, the overall rate is the weighted sum of the tensors' (the estimator of
    docs/STATISTICS.md), PVF is critical + DUE, and se / n_eff / intervals are the
    document's."""
    res = bitflip.run(digits_spec(trials=1200, sampling="adaptive"), threads=2)
    t = res.to_pandas("tensors")
    sites = {s["name"]: s["elements"] for s in res["campaign"]["sites"]}
    for _, row in t.iterrows():
        assert row["weight"] == pytest.approx(sites[row["tensor"]] / sum(sites.values()), rel=1e-12)
    assert t["weight"].sum() == pytest.approx(1.0)
    o = res.to_pandas().set_index("outcome")
    for k in ("critical", "due"):
        assert (t["weight"] * t[f"{k}_rate"]).sum() == pytest.approx(o.loc[k, "rate"], abs=1e-12)
        assert o.loc[k, "n_eff"] == res.summary["rates"][k]["n_eff"]
        assert o.loc[k, "se"] == res.summary["rates"][k]["se"]
    assert (t["pvf"] - (t["critical_rate"] + t["due_rate"])).abs().max() < 1e-12
    by = {g["tensor"]: g for g in res["by_tensor"]}
    for _, row in t.iterrows():
        g = by[row["tensor"]]
        assert [row["pvf_lo"], row["pvf_hi"]] == g["pvf"]["ci"]
        assert row["critical_n_eff"] == g["critical"]["n_eff"] and row["critical_se"] == g["critical"]["se"]
        assert row["pvf_lo"] <= row["pvf"] <= row["pvf_hi"]
    assert res.summary["adaptive"]["pilot"] > 0
