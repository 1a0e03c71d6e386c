"""The course's lessons, one module each (``l01_first_kernel`` ... ``l10_when_it_goes_wrong``);
each declares its exercises with :func:`tilelab.workshop.exercise`. The registry finds every
module here; nothing to list."""
