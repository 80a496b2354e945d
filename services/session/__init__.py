"""A live session over one workspace: how a surface opens it (opening), what is in force (inforce), the
approvals waiting, the Session itself, and the workspace's health check.
"""
