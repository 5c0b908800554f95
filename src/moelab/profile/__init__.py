"""`moelab profile`: where a real decode step's time goes, op by op, against the roofline.

impls.py (what runs per op and implementation, at real shapes), measure.py (the timer and launch
counting, injectable), step.py (the chained step), breakdown.py (the bookkeeping, pure),
runner.py (the order of work), plot.py (the PNG).
"""
