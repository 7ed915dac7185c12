"""finops.spend.report"""
