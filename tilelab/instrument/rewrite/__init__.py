"""The rewriters: TileLang's device source in, the instrumented source out (pure text or ``ast``,
no TileLang import). ``walk`` is the phase walk both timeline rewriters share."""
