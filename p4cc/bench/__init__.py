"""p4cc/bench"""
