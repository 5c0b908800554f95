"""moelab: Mixture-of-Experts decode at the memory-bandwidth limit of the GPU, with every number measured."""

__version__ = "0.1.0"
