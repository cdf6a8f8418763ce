# AliStorage2019: Alibaba distributed-storage flow-size CDF (2019).
# Source: alibaba-edu/High-Precision-Congestion-Control traffic_gen/AliStorage2019.txt,
# as listed in REFERENCE §4.  Format: "bytes cumulative-%", piecewise linear.
# Mean (piecewise linear): 40,870 B.
0 0
4000 22.93
8000 69.21
16000 80.61
32000 90.47
64000 93.53
128000 96.77
256000 97.53
2000000 100
