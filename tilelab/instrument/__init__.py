"""Instrumented kernels: the intra-kernel timeline and the hang watch. ``rewrite`` inserts marks
into TileLang's device source; ``decode`` reads the buffers they fill. The instrumented compile is
the adapter's (``tilelab._tilelang.timeline``), the launch is launch's (``tilelab.launch._timeline``,
``tilelab.launch._watch``) and the drawing is the render layer's (``tilelab.render.timeline``)."""
