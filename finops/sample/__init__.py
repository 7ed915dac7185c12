"""finops.sample"""
