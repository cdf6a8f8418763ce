# WebSearch (DCTCP paper, Alizadeh et al. SIGCOMM 2010) flow-size CDF.
# Source: alibaba-edu/High-Precision-Congestion-Control traffic_gen/WebSearch_distribution.txt,
# as listed in REFERENCE §4.  Format: "bytes cumulative-%", piecewise linear.
# Mean (piecewise linear): 1,711,250 B.
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
