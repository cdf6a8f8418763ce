"""CHAMELEON's shared pieces (Chen et al., SIGCOMM'23 poster): the monitor's message format
and connection ends, the filtered statistics, the tuning parameter space and the greedy
tuner.  Below both p4cc.hostcc and p4cc.controlplane (the reporters) so that the hosts,
the switches' control planes and the controller speak one format (docs/chameleon.md)."""
