"""The fastvideo_kernel release whose VSA API this layer mirrors, marked as served by vsa."""

__version__ = "0.3.2+vsa"
