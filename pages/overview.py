"""Overview: what did we spend, on what, and is it going up?"""
import streamlit as st

from pages._shared import current_filters, empty_state, filter_caption, query

st.title("Overview")
f = current_filters()
st.caption(filter_caption(f))
k = query("finops.spend.kpis", f)
if not k.requests:
    empty_state()
    st.stop()
c = st.columns(4)
c[0].metric("Spend", f"${k.spend_usd:,.2f}")
c[1].metric("Requests", f"{k.requests:,}")
c[2].metric("Tokens", f"{k.tokens:,}")
c[3].metric("$ per 1M tokens", "n/a" if k.cost_per_1m_tokens is None else f"${k.cost_per_1m_tokens:,.3f}")
