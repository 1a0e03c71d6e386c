"""The render layer: records drawn as text, HTML, SVG and PNG by functions, tested without IPython.

Importing the package registers every record's renderers with the records' one registry
(:func:`tilelab.records.display.register`): each module registers what it draws, as each module
of ``tabs/`` registers its tab with the inspector's page. The records load it at their first
display.
"""

from . import html, launch, profile, sanitizer, text, tiles, timeline, trace  # noqa: F401  (each registers its records)
