"""finops.ops"""
