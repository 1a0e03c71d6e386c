"""The inspection engine: ``inspect`` builds a report; the analyses read it (``links``,
``explain``, ``verdicts``, ``tma_rules``, ``mfma``, ``occupancy``, ``toolchain``); ``cache`` keeps
reports; ``corpus`` checks a directory of kernels."""
