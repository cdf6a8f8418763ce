"""p4cc/experiment/bmv2"""
