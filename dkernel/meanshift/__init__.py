"""Mean shift and mean-shift spectral clustering (MSSC) of partitions."""
