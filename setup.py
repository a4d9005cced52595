from configparser import ConfigParser
import os, setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']
setuptools.setup(
    name=cfg['lib_name'], version=cfg['version'], description=cfg['description'],
    author=cfg['author'], author_email=cfg['author_email'], url=cfg['git_url'],
    keywords=cfg['keywords'].split(),
    license={'apache2': 'Apache Software License 2.0'}.get(cfg['license'], cfg['license']),
    packages=setuptools.find_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*']),
    include_package_data=True, zip_safe=False, python_requires='>=' + cfg['min_python'],
    install_requires=cfg.get('requirements', '').split(),
    extras_require={'dev': cfg.get('dev_requirements', '').split(),
                    'peers': cfg.get('peer_requirements', '').split(),
                    'llm': cfg.get('llm_requirements', '').split(),
                    'bench': cfg.get('bench_requirements', '').split()},
    long_description=open('README.md', encoding='utf-8').read() if os.path.exists('README.md') else '',
    long_description_content_type='text/markdown',
    classifiers=['Programming Language :: Python :: 3', 'Development Status :: 2 - Pre-Alpha',
                 'Intended Audience :: Science/Research'],
    project_urls={'Repository': cfg['git_url'], 'Documentation': cfg['doc_host'] + cfg['doc_baseurl']},
    entry_points={'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
                  'console_scripts': cfg.get('console_scripts', '').split()},
)
