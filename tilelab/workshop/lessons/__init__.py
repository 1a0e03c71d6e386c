"""The course's lessons, one module each (``l01_first_kernel`` ... ``l11_many_targets``);
each declares its exercises with :func:`tilelab.workshop.exercise`. The registry finds every
module here; nothing to list."""
