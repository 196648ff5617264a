"""Draw a simulated schedule: one row per device (compute) and per link port, tasks as bars."""

from __future__ import annotations

from autotune.search_spaces.parallel.clusters import Cluster


def plot_timeline(timeline: list[tuple[int, float, float, str]], cluster: Cluster, path: str, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    D = cluster.devices
    rows = sorted({r for r, *_ in timeline})
    label = {r: (f"gpu{r}" if r < D else f"link{r - D}" if r < 2 * D else f"net{r - 2 * D}") for r in rows}
    colors = {"F": "tab:blue", "B": "tab:orange", "U": "tab:green", "X": "tab:purple", "XB": "tab:purple",
              "GS": "tab:red", "AO": "tab:brown", "AI0": "tab:pink", "AI1": "tab:pink", "WF": "tab:olive",
              "WB": "tab:olive"}
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.22 * len(rows) + 1)))
    for r, s, e, name in timeline:
        kind = name.split(" ", 1)[0]
        ax.barh(rows.index(r), (e - s) * 1e3, left=s * 1e3, height=0.8, color=colors.get(kind, "tab:gray"),
                linewidth=0)
    ax.set_yticks(range(len(rows)), [label[r] for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (ms)")
    ax.set_title(title or f"simulated iteration on {cluster.name}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("tab:blue", "tab:orange", "tab:green", "tab:purple",
                                                                "tab:red", "tab:brown", "tab:olive")]
    ax.legend(handles, ["forward", "backward", "update", "transfer", "grad all-reduce", "output all-reduce",
                        "ZeRO-3 weight gather"],
              fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
