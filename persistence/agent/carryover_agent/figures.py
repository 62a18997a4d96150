"""Live matplotlib figures: which saved figures changed since they were pickled, without pickling
them again.

A figure (and the seaborn plots drawn on it) is a large graph of artists, transforms and arrays;
pickling it costs 10 ms to seconds. It is saved like any value (in the group of the names that hold
it), and a turn re-pickles it only when the turn may have changed it. The cell's names cannot tell:
``plt.title(...)``, ``plt.plot(...)`` or ``sns.histplot(...)`` change the current figure without
naming it. Drawing cannot tell either: it rewrites caches (transforms, text layouts) and clears the
``stale`` flags, and the inline backend draws every open figure after every cell.

What tells is matplotlib's own redraw contract: an artist's setters mark it stale
(``Artist.stale = True``) whenever they change what a draw would show, so that interactive backends
redraw it. This module wraps that setter (once, class-wide) to count every such mark against the
artist's root figure (``_MARKS``). A figure is pickled through ``Figure.__getstate__``, which is
wrapped too, to note which figures a group's pickle holds and their mark at that moment, and whether
pyplot holds the figure (``_restore_to_pylab`` in its state). A group holding figures is then a
candidate of the next snapshot when any of its figures has a new mark or left/joined pyplot. The
argument that no change is missed, and its limits, are in docs/persistence.md ("Live figures")."""

import functools
import sys
import weakref

ENABLED = True  # tests switch detection off to show they catch what it catches

_MARKS = weakref.WeakKeyDictionary()  # root figure -> tick of its last stale mark
_TICK = [0]
_COLLECT = []  # the figures the pickling in progress holds: (weakref, mark, in pyplot)
_ACTIVE = [False]  # collecting (the agent's own pickling): a user's pickle.dumps notes nothing
_HOOKED = []  # the matplotlib Artist and Figure classes once wrapped
_RENDERING = [0]  # inside Figure.draw or a canvas's print_figure: marks then are matplotlib's own


def _root(artist):
    """The root figure an artist belongs to (its own, its Axes', a subfigure's parent), or None."""
    fig = getattr(artist, "figure", None)
    if fig is None:
        ax = getattr(artist, "axes", None)
        fig = getattr(ax, "figure", None) if ax is not None else None
    for _ in range(8):  # subfigures of subfigures: .figure walks up to the root, whose .figure is itself
        up = getattr(fig, "figure", None)
        if up is None or up is fig:
            break
        fig = up
    return fig


def _in_pyplot(fig):
    """Whether pyplot holds the figure: its pickle then says ``_restore_to_pylab``."""
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is None:
        return False
    manager = getattr(getattr(fig, "canvas", None), "manager", None)
    return manager is not None and any(m is manager for m in helpers.Gcf.figs.values())


def hook():
    """Wraps Artist.stale's setter and Figure.__getstate__ once matplotlib is imported. Returns
    whether the hooks are in place (matplotlib loaded and detection on)."""
    if not ENABLED:
        return False
    if _HOOKED:
        return True
    artist_mod, figure_mod = sys.modules.get("matplotlib.artist"), sys.modules.get("matplotlib.figure")
    bases_mod = sys.modules.get("matplotlib.backend_bases")
    if artist_mod is None or figure_mod is None or bases_mod is None:
        return False
    Artist, Figure, Canvas = artist_mod.Artist, figure_mod.Figure, bases_mod.FigureCanvasBase
    prop = Artist.__dict__.get("stale")
    getstate = Figure.__dict__.get("__getstate__")
    draw, print_figure = Figure.__dict__.get("draw"), Canvas.__dict__.get("print_figure")
    if not isinstance(prop, property) or prop.fset is None or None in (getstate, draw, print_figure):
        return False  # a matplotlib this module does not know: figures are saved as any value
    set_stale = prop.fset

    def fset(self, val):
        set_stale(self, val)
        if val and not _RENDERING[0]:
            fig = _root(self)
            if fig is not None:
                _TICK[0] += 1
                try:
                    _MARKS[fig] = _TICK[0]
                except TypeError:
                    pass

    def __getstate__(self):
        state = getstate(self)
        if _ACTIVE[0]:  # weakly: a pickling that raised leaves nothing alive
            _COLLECT.append((weakref.ref(self), _MARKS.get(self, 0), "_restore_to_pylab" in state))
        return state

    fset.carryover = True
    Artist.stale = property(prop.fget, fset, prop.fdel, prop.__doc__)
    Figure.draw = _rendering(draw)
    Canvas.print_figure = _rendering(print_figure)
    __getstate__.__wrapped__ = getstate
    Figure.__getstate__ = __getstate__
    _HOOKED.extend((Artist, Figure))
    return True


def _rendering(f):
    """f, with the stale marks it makes ignored: a draw derives caches, ticks and layout from the
    figure's state (and a print sets the dpi back as it found it), so what it marks is no change of
    the figure's state. Without this every draw (the inline backend draws open figures after every
    cell, a displayed figure is drawn) counted as a change."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        _RENDERING[0] += 1
        try:
            return f(*args, **kwargs)
        finally:
            _RENDERING[0] -= 1

    return wrapper


def begin():
    """Starts collecting the figures a pickle holds (pickling.pickle_one calls it before each dump)."""
    del _COLLECT[:]
    _ACTIVE[0] = _HOOKED != []


def take():
    """The figures the last dump held: ((weakref, mark, in pyplot), ...), or () when none."""
    _ACTIVE[0] = False
    if not _COLLECT:
        return ()
    seen, out = set(), []
    for ref, mark, pylab in _COLLECT:
        if ref not in seen:  # weak references to one live object are equal
            seen.add(ref)
            out.append((ref, mark, pylab))
    del _COLLECT[:]
    return tuple(out)


def loaded(objs):
    """The figures among a restored group's objects, recorded as they are now (just loaded)."""
    if not hook():
        return ()
    Figure = _HOOKED[1]
    return tuple((weakref.ref(o), _MARKS.get(o, 0), _in_pyplot(o)) for o in objs if isinstance(o, Figure))


def changed(groups, cur):
    """Names of the groups (of the last committed state) holding a figure that changed since it was
    pickled: marked stale since, taken into or out of pyplot, or gone."""
    if not hook():
        return set()
    out = set()
    for g in groups:
        figs = getattr(g, "figs", None)
        if not figs:
            continue
        for ref, mark, pylab in figs:
            fig = ref()
            if fig is None or _MARKS.get(fig, 0) != mark or _in_pyplot(fig) != pylab:
                out.update(n for n in g.names if n in cur)
                break
    return out
