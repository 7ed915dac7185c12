"""finops.cascade.sweep"""
