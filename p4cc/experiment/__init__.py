"""p4cc/experiment"""
