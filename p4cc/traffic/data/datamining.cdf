# DataMining: the VL2 data-mining flow-size CDF (Greenberg et al., SIGCOMM 2009) in the
# form used by the pFabric simulations (Alizadeh et al., SIGCOMM 2013) and by PIAS.
# Source: HKUST-SING/TrafficGenerator conf/CDF_vl2.txt (pFabric's CDF_vl2), which lists
# flow sizes in 1460-byte packets: 1 pkt 50 %, 2 60 %, 3 70 %, 7 80 %, 267 90 %,
# 2107 95 %, 66667 99 %, 666667 100 %.  Converted here to bytes (x 1460 B, the MSS
# pFabric used).  The 50 % point mass at one packet is the first two lines.
# Format: "bytes cumulative-%", piecewise linear.  Mean (piecewise linear): ~7.41 MB.
1460 0
1460 50
2920 60
4380 70
10220 80
389820 90
3076220 95
97333820 99
973333820 100
