"""The decoders: a timeline's record buffer (``timeline``) or a hang watch's slots (``hang``) read
back into records. No TileLang, no GPU."""
