"""`dbtier reproduce`: every seed article's experiments on devices modelled on its hardware, and its
headline figures beside ours, with the measured reason where they differ."""
