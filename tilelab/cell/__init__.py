"""A ``%%tilelang`` cell: the magic (``magic``), its options (``options``), one run of a cell as a
transaction (``session``), the cell's kernels (``kernels``) and its launches (``launch``)."""
