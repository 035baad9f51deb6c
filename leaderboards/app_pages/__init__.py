"""The app's pages: Streamlit scripts run by ``st.navigation`` in ``leaderboards/app.py`` (never imported)."""
