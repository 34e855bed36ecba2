"""The matplotlib style every figure shares (base layer: no imports).

The analytic figures (:mod:`assocmem.figures`) and the learned tasks' plots
(:mod:`assocmem.gpu.tasks.plots`) draw with these rc settings; keeping them here,
below both, lets the tasks plot like the figures without importing them.
"""

STYLE = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.25, "grid.linewidth": 0.5, "lines.linewidth": 1.3,
    "legend.frameon": False, "figure.dpi": 150, "savefig.dpi": 300, "savefig.bbox": "tight",
    "pdf.fonttype": 42, "mathtext.fontset": "cm",
}
