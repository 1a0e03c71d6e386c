"""tilelab's records: frozen dataclasses with a JSON round trip (``record``), each module the
records of one thing (``kernel``, ``machine``, ``launch``, ``profile``, ``timeline``,
``tile_trace``), the exceptions tilelab raises (``errors``) and the one display hook (``display``).
They import nothing of tilelab above them."""
