"""Bad: does not parse."""
def forward(x)
    return x
