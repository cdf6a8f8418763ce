"""p4cc/analysis"""
